//! YOUR CODE: a caching allocator with the design of PyTorch's CUDACachingAllocator.
//!
//! Read README.md first. lib.rs (given) calls the functions below from the tests, from many
//! threads at once; device.rs (given) is the GPU you allocate from; api.rs (given) holds the
//! constants and the types you return. std only: no crates can be downloaded here.
//!
//! Every function starts as `todo!()`: the tests show its task as "not started" until you
//! replace it. A panic anywhere else fails the test with its message and line.
#![allow(unused_imports, dead_code, unused_variables)]

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::api::*;
use crate::device::{Device, EventId, StreamId};

// --------------------------------------------------------------------------- task "sizes"
/// `size` rounded up to a multiple of MIN_BLOCK_SIZE (512 B); never less than 512.
pub fn round_size(size: u64) -> u64 {
    todo!("round_size")
}

/// Does a request of `rounded` bytes come from the small pool (at most SMALL_SIZE, 1 MiB)?
pub fn is_small(rounded: u64) -> bool {
    todo!("is_small")
}

/// How big a segment to ask the device for when no cached block fits `rounded` bytes:
/// SMALL_BUFFER for small requests, LARGE_BUFFER below MIN_LARGE_ALLOC, else the request
/// rounded up to a multiple of ROUND_LARGE.
pub fn segment_size(rounded: u64) -> u64 {
    todo!("segment_size")
}

/// A free block of `block_size` bytes serves a request of `rounded` bytes: should it be split,
/// the rest staying free in the pool? (Small pool: when at least 512 bytes remain; large pool:
/// when more than SMALL_SIZE remains.)
pub fn should_split(block_size: u64, rounded: u64) -> bool {
    todo!("should_split")
}

// --------------------------------------------------------------------------- the allocator
/// Shared by every thread that calls in: keep the state behind a Mutex (lib.rs requires
/// `CachingAllocator: Send + Sync`).
pub struct CachingAllocator {
    device: Arc<Device>,
    // your state: blocks, the two pools, segments, blocks waiting for events, the stats
}

impl CachingAllocator {
    pub fn new(device: Arc<Device>) -> CachingAllocator {
        todo!("CachingAllocator::new")
    }

    /// A block of at least `size` bytes for use on `stream`: the best fit from the pool of
    /// `stream` (small or large by size), split if worth it; else a new segment from the
    /// device; if the device is out of memory, give the cache back and retry once.
    /// `size == 0` returns the null pointer 0 and allocates nothing.
    pub fn malloc(&self, size: u64, stream: StreamId) -> Result<u64, AllocError> {
        todo!("CachingAllocator::malloc")
    }

    /// Give a block back to its pool, merged with free neighbours. A block that was
    /// record_stream'ed on other streams waits for an event on each of them first.
    /// `free(0)` does nothing; anything else that is not a live allocation is InvalidPointer.
    pub fn free(&self, ptr: u64) -> Result<(), AllocError> {
        todo!("CachingAllocator::free")
    }

    /// `ptr` is also used by kernels on `stream` (not the one it was allocated on).
    pub fn record_stream(&self, ptr: u64, stream: StreamId) -> Result<(), AllocError> {
        todo!("CachingAllocator::record_stream")
    }

    /// torch.cuda.empty_cache(): wait for pending events, then give every segment that is
    /// entirely free back to the device.
    pub fn empty_cache(&self) {
        todo!("CachingAllocator::empty_cache")
    }

    /// The counters of api::Stats.
    pub fn stats(&self) -> Stats {
        todo!("CachingAllocator::stats")
    }

    /// Every segment, in address order, with its blocks in address order.
    pub fn snapshot(&self) -> Vec<SegmentInfo> {
        todo!("CachingAllocator::snapshot")
    }
}

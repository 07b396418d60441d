//! GIVEN: the types allocator.rs hands back through lib.rs's C ABI, and PyTorch's constants
//! (c10/cuda/CUDACachingAllocator.cpp). Do not edit.

/// Every size is rounded up to a multiple of this (kMinBlockSize).
pub const MIN_BLOCK_SIZE: u64 = 512;
/// Requests up to this size come from the small pool (kSmallSize, 1 MiB).
pub const SMALL_SIZE: u64 = 1 << 20;
/// The small pool's segments are this big (kSmallBuffer, 2 MiB).
pub const SMALL_BUFFER: u64 = 2 << 20;
/// Large requests below MIN_LARGE_ALLOC get a segment this big (kLargeBuffer, 20 MiB).
pub const LARGE_BUFFER: u64 = 20 << 20;
/// Large requests of this size and more get their own segment (kMinLargeAlloc, 10 MiB) ...
pub const MIN_LARGE_ALLOC: u64 = 10 << 20;
/// ... rounded up to a multiple of this (kRoundLarge, 2 MiB).
pub const ROUND_LARGE: u64 = 2 << 20;

/// Why a call failed (lib.rs turns these into status codes and messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocError {
    /// The device could not supply a segment even after freeing the cache: the message says
    /// how much was asked and what the device and the allocator hold (PyTorch's OOM message).
    OutOfMemory(String),
    /// free / record_stream of a pointer that is not a live allocation.
    InvalidPointer(u64),
}

/// The counters `torch.cuda.memory_stats()` reports (all in bytes except the counts).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Stats {
    /// Bytes of blocks handed out and not yet freed (a block's full size, split or not).
    pub allocated: u64,
    /// Bytes of all segments obtained from the device and not yet given back.
    pub reserved: u64,
    /// Allocated bytes plus freed blocks still waiting for other streams' events.
    pub active: u64,
    /// Free bytes in segments that are partly in use (free blocks with a neighbour block).
    pub inactive_split: u64,
    pub peak_allocated: u64,
    pub peak_reserved: u64,
    /// Successful device mallocs and frees (cudaMalloc / cudaFree calls).
    pub device_mallocs: u64,
    pub device_frees: u64,
    /// Device mallocs that failed and were retried after freeing the cache.
    pub alloc_retries: u64,
    /// Requests that failed with OutOfMemory.
    pub ooms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockState {
    Free = 0,
    Allocated = 1,
    /// Freed by the program, but other streams it was recorded on may still use it.
    AwaitingEvents = 2,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockInfo {
    pub address: u64,
    pub size: u64,
    pub state: BlockState,
}

/// One device allocation and the blocks it is split into (torch.cuda.memory_snapshot()).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    pub address: u64,
    pub size: u64,
    pub stream: u64,
    pub small: bool,
    /// In address order, covering the segment exactly.
    pub blocks: Vec<BlockInfo>,
}

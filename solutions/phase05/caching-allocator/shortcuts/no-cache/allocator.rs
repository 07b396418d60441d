//! Regression shortcut (task "speed"): no cache, a device malloc per request (the device map is O(1)).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::api::*;
use crate::device::{Device, EventId, StreamId};

// --------------------------------------------------------------------------- sizes
/// `size` rounded up to a multiple of MIN_BLOCK_SIZE; at least MIN_BLOCK_SIZE.
pub fn round_size(size: u64) -> u64 {
    if size < MIN_BLOCK_SIZE {
        MIN_BLOCK_SIZE
    } else {
        (size + MIN_BLOCK_SIZE - 1) / MIN_BLOCK_SIZE * MIN_BLOCK_SIZE
    }
}

/// Does a request of `rounded` bytes come from the small pool?
pub fn is_small(rounded: u64) -> bool {
    rounded <= SMALL_SIZE
}

/// How big a segment to ask the device for when no cached block fits `rounded`.
pub fn segment_size(rounded: u64) -> u64 {
    if rounded <= SMALL_SIZE {
        SMALL_BUFFER
    } else if rounded < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        (rounded + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE
    }
}

/// Should a free block of `block_size` serving `rounded` bytes be split, the rest kept free?
pub fn should_split(block_size: u64, rounded: u64) -> bool {
    let remaining = block_size - rounded;
    if is_small(rounded) {
        remaining >= MIN_BLOCK_SIZE
    } else {
        remaining > SMALL_SIZE
    }
}

// --------------------------------------------------------------------------- the allocator
struct Block {
    size: u64,
    stream: StreamId,
    small: bool,
    prev: Option<u64>, // address of the neighbour below, same segment
    next: Option<u64>,
    state: BlockState,
    stream_uses: Vec<StreamId>,
    event_count: usize,
}

/// A pool key: blocks of one stream sorted by size, then address, so the first key at or
/// after (stream, size, 0) is the best fit.
type Key = (StreamId, u64, u64);

#[derive(Default)]
struct State {
    blocks: HashMap<u64, Block>,
    small_pool: BTreeSet<Key>,
    large_pool: BTreeSet<Key>,
    segments: BTreeMap<u64, (u64, StreamId, bool)>,
    pending: VecDeque<(EventId, u64)>,
    stats: Stats,
}

pub struct CachingAllocator {
    device: Arc<Device>,
    state: Mutex<State>,
}

impl State {
    fn pool(&mut self, small: bool) -> &mut BTreeSet<Key> {
        if small {
            &mut self.small_pool
        } else {
            &mut self.large_pool
        }
    }

    fn take_best_fit(&mut self, stream: StreamId, rounded: u64, small: bool) -> Option<u64> {
        let pool = self.pool(small);
        let key = *pool.range((stream, rounded, 0)..).next()?;
        if key.0 != stream {
            return None;
        }
        pool.remove(&key);
        Some(key.2)
    }

    fn to_pool(&mut self, addr: u64) {
        let b = &self.blocks[&addr];
        let key = (b.stream, b.size, addr);
        let small = b.small;
        self.pool(small).insert(key);
    }

    fn from_pool(&mut self, addr: u64) {
        let b = &self.blocks[&addr];
        let key = (b.stream, b.size, addr);
        let small = b.small;
        self.pool(small).remove(&key);
    }

    fn bump_peaks(&mut self) {
        let s = &mut self.stats;
        s.peak_allocated = s.peak_allocated.max(s.allocated);
        s.peak_reserved = s.peak_reserved.max(s.reserved);
    }

    /// A block nobody uses any more: merge it with free neighbours, put it in its pool.
    fn free_block(&mut self, addr: u64) {
        let mut addr = addr;
        let size = self.blocks[&addr].size;
        self.stats.active -= size;
        self.blocks.get_mut(&addr).unwrap().state = BlockState::Free;
        if let Some(p) = self.blocks[&addr].prev {
            if self.blocks[&p].state == BlockState::Free {
                self.from_pool(p);
                self.absorb_next(p);
                addr = p;
            }
        }
        if let Some(n) = self.blocks[&addr].next {
            if self.blocks[&n].state == BlockState::Free {
                self.from_pool(n);
                self.absorb_next(addr);
            }
        }
        self.to_pool(addr);
    }

    /// Merge block `addr`'s next neighbour into it.
    fn absorb_next(&mut self, addr: u64) {
        let n = self.blocks[&addr].next.unwrap();
        let gone = self.blocks.remove(&n).unwrap();
        if let Some(nn) = gone.next {
            self.blocks.get_mut(&nn).unwrap().prev = Some(addr);
        }
        let b = self.blocks.get_mut(&addr).unwrap();
        b.size += gone.size;
        b.next = gone.next;
    }

    fn event_done(&mut self, device: &Device, ev: EventId, addr: u64) {
        device.release_event(ev);
        let b = self.blocks.get_mut(&addr).unwrap();
        b.event_count -= 1;
        if b.event_count == 0 {
            self.free_block(addr);
        }
    }

    /// Return the blocks whose streams have finished with them (non-blocking).
    fn process_events(&mut self, device: &Device) {
        let mut waiting = VecDeque::with_capacity(self.pending.len());
        while let Some((ev, addr)) = self.pending.pop_front() {
            if device.query_event(ev) {
                self.event_done(device, ev, addr);
            } else {
                waiting.push_back((ev, addr));
            }
        }
        self.pending = waiting;
    }

    fn synchronize_and_free_events(&mut self, device: &Device) {
        while let Some((ev, addr)) = self.pending.pop_front() {
            device.synchronize_event(ev);
            self.event_done(device, ev, addr);
        }
    }

    /// Give every whole free segment back to the device (empty_cache, and the OOM retry).
    fn release_cached_blocks(&mut self, device: &Device) {
        self.synchronize_and_free_events(device);
        let whole: Vec<Key> = self
            .small_pool
            .iter()
            .chain(self.large_pool.iter())
            .filter(|k| {
                let b = &self.blocks[&k.2];
                b.prev.is_none() && b.next.is_none()
            })
            .copied()
            .collect();
        for key in whole {
            let small = self.blocks[&key.2].small;
            self.pool(small).remove(&key);
            self.blocks.remove(&key.2);
            self.segments.remove(&key.2);
            device.free(key.2);
            self.stats.reserved -= key.1;
            self.stats.device_frees += 1;
        }
    }

    fn oom_message(&self, device: &Device, size: u64, rounded: u64) -> String {
        let info = device.info();
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        format!(
            "out of memory: tried to allocate {:.2} MiB ({} bytes, {} rounded). The device has \
             a total capacity of {:.2} MiB of which {:.2} MiB is free. {:.2} MiB is reserved \
             by this allocator, {:.2} MiB of it allocated.",
            mib(rounded),
            size,
            rounded,
            mib(info.capacity),
            mib(info.capacity - info.used),
            mib(self.stats.reserved),
            mib(self.stats.allocated)
        )
    }
}

impl CachingAllocator {
    pub fn new(device: Arc<Device>) -> CachingAllocator {
        CachingAllocator { device, state: Mutex::new(State::default()) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn malloc(&self, size: u64, stream: StreamId) -> Result<u64, AllocError> {
        if size == 0 {
            return Ok(0);
        }
        // The shortcut: no cache at all, a device malloc per request (the device's map is O(1)).
        if let Some(p) = self.device.malloc(round_size(size)) {
            return Ok(p);
        }
        let dev = &*self.device;
        let mut st = self.lock();
        st.process_events(dev);
        let rounded = round_size(size);
        let small = is_small(rounded);
        let addr = match st.take_best_fit(stream, rounded, small) {
            Some(addr) => addr,
            None => {
                let seg = segment_size(rounded);
                let ptr = match dev.malloc(seg) {
                    Some(p) => p,
                    None => {
                        st.stats.alloc_retries += 1;
                        st.release_cached_blocks(dev);
                        match dev.malloc(seg) {
                            Some(p) => p,
                            None => {
                                st.stats.ooms += 1;
                                return Err(AllocError::OutOfMemory(
                                    st.oom_message(dev, size, rounded),
                                ));
                            }
                        }
                    }
                };
                let block = Block {
                    size: seg,
                    stream,
                    small,
                    prev: None,
                    next: None,
                    state: BlockState::Free,
                    stream_uses: Vec::new(),
                    event_count: 0,
                };
                st.blocks.insert(ptr, block);
                st.segments.insert(ptr, (seg, stream, small));
                st.stats.reserved += seg;
                st.stats.device_mallocs += 1;
                ptr
            }
        };
        let size_now = st.blocks[&addr].size;
        if should_split(size_now, rounded) {
            let rest = addr + rounded;
            let next = st.blocks[&addr].next;
            let remainder = Block {
                size: size_now - rounded,
                stream,
                small,
                prev: Some(addr),
                next,
                state: BlockState::Free,
                stream_uses: Vec::new(),
                event_count: 0,
            };
            if let Some(n) = next {
                st.blocks.get_mut(&n).unwrap().prev = Some(rest);
            }
            st.blocks.insert(rest, remainder);
            st.to_pool(rest);
            let b = st.blocks.get_mut(&addr).unwrap();
            b.size = rounded;
            b.next = Some(rest);
        }
        let b = st.blocks.get_mut(&addr).unwrap();
        b.state = BlockState::Allocated;
        let got = b.size;
        st.stats.allocated += got;
        st.stats.active += got;
        st.bump_peaks();
        Ok(addr)
    }

    pub fn free(&self, ptr: u64) -> Result<(), AllocError> {
        if ptr == 0 {
            return Ok(());
        }
        if !self.lock().blocks.contains_key(&ptr) {
            self.device.free(ptr); // not one of the cache's: a device allocation of the shortcut
            return Ok(());
        }
        let dev = &*self.device;
        let mut st = self.lock();
        let b = match st.blocks.get_mut(&ptr) {
            Some(b) if b.state == BlockState::Allocated => b,
            _ => return Err(AllocError::InvalidPointer(ptr)),
        };
        let size = b.size;
        if b.stream_uses.is_empty() {
            st.stats.allocated -= size;
            st.free_block(ptr);
            return Ok(());
        }
        let uses = std::mem::take(&mut b.stream_uses);
        b.event_count = uses.len();
        b.state = BlockState::AwaitingEvents;
        st.stats.allocated -= size;
        for s in uses {
            let ev = dev.record_event(s);
            st.pending.push_back((ev, ptr));
        }
        Ok(())
    }

    pub fn record_stream(&self, ptr: u64, stream: StreamId) -> Result<(), AllocError> {
        let mut st = self.lock();
        match st.blocks.get_mut(&ptr) {
            Some(b) if b.state == BlockState::Allocated => {
                if b.stream != stream && !b.stream_uses.contains(&stream) {
                    b.stream_uses.push(stream);
                }
                Ok(())
            }
            _ => Err(AllocError::InvalidPointer(ptr)),
        }
    }

    pub fn empty_cache(&self) {
        let dev = &*self.device;
        self.lock().release_cached_blocks(dev);
    }

    pub fn stats(&self) -> Stats {
        let st = self.lock();
        let mut s = st.stats;
        s.inactive_split = st
            .small_pool
            .iter()
            .chain(st.large_pool.iter())
            .filter(|k| {
                let b = &st.blocks[&k.2];
                b.prev.is_some() || b.next.is_some()
            })
            .map(|k| k.1)
            .sum();
        s
    }

    pub fn snapshot(&self) -> Vec<SegmentInfo> {
        let st = self.lock();
        let mut out = Vec::with_capacity(st.segments.len());
        for (&address, &(size, stream, small)) in st.segments.iter() {
            let mut blocks = Vec::new();
            let mut at = Some(address);
            while let Some(a) = at {
                let b = &st.blocks[&a];
                blocks.push(BlockInfo { address: a, size: b.size, state: b.state });
                at = b.next;
            }
            out.push(SegmentInfo { address, size, stream, small, blocks });
        }
        out
    }
}

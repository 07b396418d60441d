//! GIVEN: a simulated GPU. Do not edit; allocator.rs uses it the way PyTorch's
//! CUDACachingAllocator uses the CUDA runtime:
//!
//! | here                         | CUDA                                   |
//! |------------------------------|----------------------------------------|
//! | `Device::malloc(size)`       | `cudaMalloc` (slow: ~10-100 us, maybe out of memory) |
//! | `Device::free(ptr)`          | `cudaFree` (synchronizes the whole device first) |
//! | `Device::record_event(s)`    | `cudaEventRecord(ev, s)`               |
//! | `Device::query_event(ev)`    | `cudaEventQuery(ev) == cudaSuccess`    |
//! | `Device::synchronize_event`  | `cudaEventSynchronize(ev)`             |
//! | `Device::release_event(ev)`  | `cudaEventDestroy(ev)`                 |
//!
//! Streams are numbers (`0` is the default stream). The tests "launch kernels" on a stream
//! (`launch`) and let the device finish a stream's work (`complete`) or all of it
//! (`synchronize`): an event recorded on a stream completes once every kernel launched on that
//! stream before the record has completed.
//!
//! The device has a capacity in bytes and counts a cost per malloc in simulated time (nothing
//! sleeps). Addresses of different mallocs never repeat and are 2 MiB aligned.

use std::collections::HashMap;
use std::sync::Mutex;

pub type StreamId = u64;
pub type EventId = u64;

const BASE_ADDRESS: u64 = 0x7f00_0000_0000;
const ALIGN: u64 = 2 << 20;

#[derive(Default)]
struct StreamWork {
    launched: u64,
    completed: u64,
}

#[derive(Default)]
struct State {
    used: u64,
    peak_used: u64,
    next_address: u64,
    allocations: HashMap<u64, u64>,
    mallocs: u64,
    frees: u64,
    failed_mallocs: u64,
    simulated_ns: u64,
    streams: HashMap<StreamId, StreamWork>,
    next_event: EventId,
    events: HashMap<EventId, (StreamId, u64)>,
    bad_calls: u64,
}

/// The simulated device. All methods take `&self` and are thread-safe.
pub struct Device {
    capacity: u64,
    malloc_cost_ns: u64,
    state: Mutex<State>,
}

/// What the device counted (for the tests; allocator.rs need not read it).
#[derive(Clone, Copy, Default, Debug)]
pub struct DeviceInfo {
    pub capacity: u64,
    pub used: u64,
    pub peak_used: u64, // the most `used` has been: the allocator's peak reserved, measured here
    pub mallocs: u64,
    pub frees: u64,
    pub failed_mallocs: u64,
    pub live_events: u64,
    pub simulated_ns: u64,
    pub bad_calls: u64,
}

impl Device {
    pub fn new(capacity: u64, malloc_cost_ns: u64) -> Device {
        let state = State { next_address: BASE_ADDRESS, next_event: 1, ..State::default() };
        Device { capacity, malloc_cost_ns, state: Mutex::new(state) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `cudaMalloc`: a new allocation of exactly `size` bytes, or None when it does not fit.
    pub fn malloc(&self, size: u64) -> Option<u64> {
        let mut s = self.lock();
        s.simulated_ns += self.malloc_cost_ns;
        if size == 0 || s.used + size > self.capacity {
            s.failed_mallocs += 1;
            return None;
        }
        let ptr = s.next_address;
        s.next_address += (size + ALIGN - 1) / ALIGN * ALIGN;
        s.used += size;
        s.peak_used = s.peak_used.max(s.used);
        s.mallocs += 1;
        s.allocations.insert(ptr, size);
        Some(ptr)
    }

    /// `cudaFree`: gives a whole device allocation back. Like cudaFree it first waits for all
    /// work on every stream. Freeing anything but a pointer `malloc` returned is counted as a
    /// bad call (the tests fail on it).
    pub fn free(&self, ptr: u64) {
        let mut s = self.lock();
        for w in s.streams.values_mut() {
            w.completed = w.launched;
        }
        s.simulated_ns += self.malloc_cost_ns;
        match s.allocations.remove(&ptr) {
            Some(size) => {
                s.used -= size;
                s.frees += 1;
            }
            None => s.bad_calls += 1,
        }
    }

    /// `cudaEventRecord`: an event that completes when the work launched on `stream` so far has.
    pub fn record_event(&self, stream: StreamId) -> EventId {
        let mut s = self.lock();
        let target = s.streams.get(&stream).map_or(0, |w| w.launched);
        let ev = s.next_event;
        s.next_event += 1;
        s.events.insert(ev, (stream, target));
        ev
    }

    /// `cudaEventQuery`: has the event completed?
    pub fn query_event(&self, ev: EventId) -> bool {
        let mut s = self.lock();
        match s.events.get(&ev).copied() {
            Some((stream, target)) => s.streams.get(&stream).map_or(0, |w| w.completed) >= target,
            None => {
                s.bad_calls += 1;
                true
            }
        }
    }

    /// `cudaEventSynchronize`: wait until the event completes (here: complete its stream's
    /// work up to the event at once).
    pub fn synchronize_event(&self, ev: EventId) {
        let mut s = self.lock();
        match s.events.get(&ev).copied() {
            Some((stream, target)) => {
                let w = s.streams.entry(stream).or_default();
                w.completed = w.completed.max(target);
            }
            None => s.bad_calls += 1,
        }
    }

    /// `cudaEventDestroy`: every recorded event must be released exactly once.
    pub fn release_event(&self, ev: EventId) {
        let mut s = self.lock();
        if s.events.remove(&ev).is_none() {
            s.bad_calls += 1;
        }
    }

    /// The tests' side: a kernel launched on `stream` (it will use memory until it completes).
    pub fn launch(&self, stream: StreamId) {
        self.lock().streams.entry(stream).or_default().launched += 1;
    }

    /// The tests' side: every kernel launched on `stream` so far has completed.
    pub fn complete(&self, stream: StreamId) {
        let mut s = self.lock();
        let w = s.streams.entry(stream).or_default();
        w.completed = w.launched;
    }

    /// `cudaDeviceSynchronize`: all work on all streams completes.
    pub fn synchronize(&self) {
        for w in self.lock().streams.values_mut() {
            w.completed = w.launched;
        }
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn info(&self) -> DeviceInfo {
        let s = self.lock();
        DeviceInfo {
            capacity: self.capacity,
            used: s.used,
            peak_used: s.peak_used,
            mallocs: s.mallocs,
            frees: s.frees,
            failed_mallocs: s.failed_mallocs,
            live_events: s.events.len() as u64,
            simulated_ns: s.simulated_ns,
            bad_calls: s.bad_calls,
        }
    }
}

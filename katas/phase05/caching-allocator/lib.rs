//! GIVEN: the C ABI the Python tests call through cffi (declared in allocator.h). Do not edit.
//!
//! Every call runs inside `catch_unwind`: a `todo!()` left in allocator.rs comes back as
//! KATA_TODO ("not started"), any other panic as KATA_PANIC with its message, so a bug never
//! aborts the test process. `kata_replay` and `kata_stress` run whole workloads in Rust, so
//! what is timed is your allocator, not Python calling it.

pub mod allocator;
pub mod api;
pub mod device;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Barrier, Mutex, Once};
use std::time::Instant;

use allocator::CachingAllocator;
use api::{AllocError, BlockState, Stats};
use device::{Device, DeviceInfo};

pub const KATA_OK: i32 = 0;
pub const KATA_OOM: i32 = 1;
pub const KATA_INVALID: i32 = 2;
pub const KATA_TODO: i32 = -2;
pub const KATA_PANIC: i32 = -3;

// The allocator is shared by every thread that calls in: it must be Send + Sync (a Mutex
// inside, as PyTorch's DeviceCachingAllocator has).
fn _assert_thread_safe<T: Send + Sync>() {}
const _: fn() = _assert_thread_safe::<CachingAllocator>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}
static QUIET_PANICS: Once = Once::new();

fn set_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

/// Run `f`, turning panics into status codes (and the message into kata_last_error()).
fn guarded<F: FnOnce() -> i32>(f: F) -> i32 {
    QUIET_PANICS.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let at = info.location().map(|l| format!(" (at {}:{})", l.file(), l.line()));
            set_error(&format!("{}{}", panic_message(info.payload()), at.unwrap_or_default()));
        }))
    });
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(code) => code,
        Err(payload) => {
            if panic_message(&*payload).starts_with("not yet implemented") {
                KATA_TODO
            } else {
                KATA_PANIC
            }
        }
    }
}

fn status(r: Result<(), AllocError>) -> i32 {
    match r {
        Ok(()) => KATA_OK,
        Err(AllocError::OutOfMemory(msg)) => {
            set_error(&msg);
            KATA_OOM
        }
        Err(AllocError::InvalidPointer(p)) => {
            set_error(&format!("{p:#x} is not a live allocation of this allocator"));
            KATA_INVALID
        }
    }
}

#[no_mangle]
pub extern "C" fn kata_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

// --------------------------------------------------------------------------- device
pub struct KataDevice(Arc<Device>);

#[no_mangle]
pub extern "C" fn kata_device_new(capacity: u64, malloc_cost_ns: u64) -> *mut KataDevice {
    Box::into_raw(Box::new(KataDevice(Arc::new(Device::new(capacity, malloc_cost_ns)))))
}

/// # Safety
/// `d` comes from kata_device_new and is destroyed once.
#[no_mangle]
pub unsafe extern "C" fn kata_device_destroy(d: *mut KataDevice) {
    if !d.is_null() {
        drop(Box::from_raw(d));
    }
}

/// # Safety
/// `d` is a live device.
#[no_mangle]
pub unsafe extern "C" fn kata_device_launch(d: *const KataDevice, stream: u64) {
    (*d).0.launch(stream)
}

/// # Safety
/// `d` is a live device.
#[no_mangle]
pub unsafe extern "C" fn kata_device_complete(d: *const KataDevice, stream: u64) {
    (*d).0.complete(stream)
}

/// # Safety
/// `d` is a live device.
#[no_mangle]
pub unsafe extern "C" fn kata_device_synchronize(d: *const KataDevice) {
    (*d).0.synchronize()
}

/// # Safety
/// `d` is a live device, `out` points to a DeviceInfo.
#[no_mangle]
pub unsafe extern "C" fn kata_device_info(d: *const KataDevice, out: *mut DeviceInfoC) {
    let i: DeviceInfo = (*d).0.info();
    *out = DeviceInfoC {
        capacity: i.capacity,
        used: i.used,
        peak_used: i.peak_used,
        mallocs: i.mallocs,
        frees: i.frees,
        failed_mallocs: i.failed_mallocs,
        live_events: i.live_events,
        simulated_ns: i.simulated_ns,
        bad_calls: i.bad_calls,
    };
}

#[repr(C)]
pub struct DeviceInfoC {
    capacity: u64,
    used: u64,
    peak_used: u64,
    mallocs: u64,
    frees: u64,
    failed_mallocs: u64,
    live_events: u64,
    simulated_ns: u64,
    bad_calls: u64,
}

// --------------------------------------------------------------------------- sizes
/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn kata_sizes(size: u64, request: u64, out: *mut u64) -> i32 {
    // out[0] round_size(size), [1] is_small(size), [2] segment_size(size),
    // [3] should_split(size, request) (size is a block size there).
    guarded(|| {
        *out = allocator::round_size(size);
        *out.add(1) = allocator::is_small(size) as u64;
        *out.add(2) = allocator::segment_size(size);
        *out.add(3) = (request <= size && allocator::should_split(size, request)) as u64;
        KATA_OK
    })
}

// --------------------------------------------------------------------------- allocator
pub struct KataAllocator {
    alloc: CachingAllocator,
    device: Arc<Device>,
}

/// # Safety
/// `d` is a live device; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn kata_allocator_new(d: *const KataDevice, out: *mut *mut KataAllocator) -> i32 {
    let device = (*d).0.clone();
    guarded(|| {
        let alloc = CachingAllocator::new(device.clone());
        *out = Box::into_raw(Box::new(KataAllocator { alloc, device }));
        KATA_OK
    })
}

/// # Safety
/// `a` comes from kata_allocator_new and is destroyed once. Memory it holds stays reserved
/// on the device (as a process's does until it exits).
#[no_mangle]
pub unsafe extern "C" fn kata_allocator_destroy(a: *mut KataAllocator) {
    if !a.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(a))));
    }
}

/// # Safety
/// `a` is live, `out` writable.
#[no_mangle]
pub unsafe extern "C" fn kata_malloc(a: *const KataAllocator, size: u64, stream: u64, out: *mut u64) -> i32 {
    let a = &*a;
    guarded(|| match a.alloc.malloc(size, stream) {
        Ok(p) => {
            *out = p;
            KATA_OK
        }
        Err(e) => status(Err(e)),
    })
}

/// # Safety
/// `a` is live.
#[no_mangle]
pub unsafe extern "C" fn kata_free(a: *const KataAllocator, ptr: u64) -> i32 {
    let a = &*a;
    guarded(|| status(a.alloc.free(ptr)))
}

/// # Safety
/// `a` is live.
#[no_mangle]
pub unsafe extern "C" fn kata_record_stream(a: *const KataAllocator, ptr: u64, stream: u64) -> i32 {
    let a = &*a;
    guarded(|| status(a.alloc.record_stream(ptr, stream)))
}

/// # Safety
/// `a` is live.
#[no_mangle]
pub unsafe extern "C" fn kata_empty_cache(a: *const KataAllocator) -> i32 {
    let a = &*a;
    guarded(|| {
        a.alloc.empty_cache();
        KATA_OK
    })
}

/// # Safety
/// `a` is live, `out` writable.
#[no_mangle]
pub unsafe extern "C" fn kata_stats(a: *const KataAllocator, out: *mut Stats) -> i32 {
    let a = &*a;
    guarded(|| {
        *out = a.alloc.stats();
        KATA_OK
    })
}

#[repr(C)]
pub struct BlockC {
    segment: u64,
    segment_size: u64,
    address: u64,
    size: u64,
    stream: u64,
    state: i32,
    small: i32,
}

/// All blocks of all segments in address order; `*n` is their number (at most `cap` written).
///
/// # Safety
/// `a` is live, `out` has room for `cap` blocks, `n` writable.
#[no_mangle]
pub unsafe extern "C" fn kata_snapshot(a: *const KataAllocator, out: *mut BlockC, cap: u64, n: *mut u64) -> i32 {
    let a = &*a;
    guarded(|| {
        let mut i = 0u64;
        for seg in a.alloc.snapshot() {
            for b in seg.blocks {
                if i < cap {
                    *out.add(i as usize) = BlockC {
                        segment: seg.address,
                        segment_size: seg.size,
                        address: b.address,
                        size: b.size,
                        stream: seg.stream,
                        state: b.state as i32,
                        small: seg.small as i32,
                    };
                }
                i += 1;
            }
        }
        *n = i;
        KATA_OK
    })
}

// --------------------------------------------------------------------------- workloads
pub const OP_MALLOC: u32 = 0;
pub const OP_FREE: u32 = 1;
pub const OP_RECORD_STREAM: u32 = 2;
pub const OP_LAUNCH: u32 = 3;
pub const OP_COMPLETE: u32 = 4;
pub const OP_EMPTY_CACHE: u32 = 5;
pub const OP_SYNCHRONIZE: u32 = 6;

/// One step of a trace: `id` names an allocation (0, 1, 2 ... in order of malloc).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Op {
    kind: u32,
    stream: u32,
    id: u64,
    size: u64,
}

/// Replay `n` ops; `*elapsed_ns` is the time spent inside the allocator's calls.
///
/// # Safety
/// `a` is live, `ops` holds `n` ops, `elapsed_ns` writable.
#[no_mangle]
pub unsafe extern "C" fn kata_replay(a: *const KataAllocator, ops: *const Op, n: u64, elapsed_ns: *mut u64) -> i32 {
    let a = &*a;
    let ops = std::slice::from_raw_parts(ops, n as usize);
    guarded(|| {
        let mut ptrs: Vec<u64> = Vec::new();
        let start = Instant::now();
        for (i, op) in ops.iter().enumerate() {
            let (stream, id) = (op.stream as u64, op.id as usize);
            let r = match op.kind {
                OP_MALLOC => a.alloc.malloc(op.size, stream).map(|p| {
                    if ptrs.len() <= id {
                        ptrs.resize(id + 1, 0);
                    }
                    ptrs[id] = p;
                }),
                OP_FREE => a.alloc.free(ptrs[id]),
                OP_RECORD_STREAM => a.alloc.record_stream(ptrs[id], stream),
                OP_LAUNCH => Ok(a.device.launch(stream)),
                OP_COMPLETE => Ok(a.device.complete(stream)),
                OP_EMPTY_CACHE => Ok(a.alloc.empty_cache()),
                OP_SYNCHRONIZE => Ok(a.device.synchronize()),
                k => panic!("unknown op kind {k}"),
            };
            if let Err(e) = r {
                let code = status(Err(e));
                LAST_ERROR.with(|m| {
                    let text = format!("op {i}: {}", m.borrow().to_string_lossy());
                    *m.borrow_mut() = CString::new(text).unwrap_or_default();
                });
                return code;
            }
        }
        *elapsed_ns = start.elapsed().as_nanos() as u64;
        KATA_OK
    })
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic per thread, no crates needed
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The side stream of `kata_stress`: threads launch kernels on it, complete its work, and tell
/// the allocator that blocks are used on it (`record_stream`).
const STRESS_SIDE_STREAM: u64 = 2;

/// A block in `kata_stress`'s registry: its size, and once freed after `record_stream`, an
/// event recorded on the side stream just before the free (the block may be reused only
/// once the event has completed).
type StressEntry = (u64, Option<device::EventId>);

/// Counts the live or still-in-use blocks of `reg` that the new block [p, p + size) overlaps;
/// entries freed after record_stream whose side-stream work has completed are dropped first.
fn stress_overlaps(device: &Device, reg: &mut BTreeMap<u64, StressEntry>, p: u64, size: u64) -> u64 {
    let mut bad = 0;
    loop {
        let below = reg.range(..=p).next_back().filter(|(&s, e)| s + e.0 > p).map(|(&s, _)| s);
        let above = reg.range(p..).next().filter(|(&s, _)| s < p + size).map(|(&s, _)| s);
        let Some(at) = below.or(above) else { return bad };
        let (_, ev) = reg.remove(&at).unwrap();
        match ev {
            Some(ev) if device.query_event(ev) => device.release_event(ev),
            Some(ev) => {
                device.release_event(ev);
                bad += 1;
            }
            None => bad += 1,
        }
    }
}

/// `threads` threads, each doing `ops` random mallocs and frees (on stream `thread % 2`) at
/// once; they also launch kernels on stream 2, complete its work, and record_stream some blocks
/// on it before freeing them. A shared registry of live blocks (and of blocks freed after
/// record_stream whose stream-2 work may still run) counts every overlap of a new block with
/// one of them into `*violations`. Everything is freed at the end and stream 2 completed.
///
/// # Safety
/// `a` is live, `violations` writable.
#[no_mangle]
pub unsafe extern "C" fn kata_stress(a: *const KataAllocator, threads: u32, ops: u64, seed: u64, violations: *mut u64) -> i32 {
    let a = &*a;
    let live: Mutex<BTreeMap<u64, StressEntry>> = Mutex::new(BTreeMap::new());
    let bad = Mutex::new(0u64);
    let first_error = Mutex::new(KATA_OK);
    let start = Barrier::new(threads as usize);
    let device = &*a.device;
    let free = |p: u64, recorded: bool, live: &Mutex<BTreeMap<u64, StressEntry>>| {
        let mut reg = live.lock().unwrap();
        if recorded {
            // recorded before the allocator's own event: it completes no later than that one
            let ev = device.record_event(STRESS_SIDE_STREAM);
            if let Some(e) = reg.get_mut(&p) {
                e.1 = Some(ev);
            }
        } else {
            reg.remove(&p);
        }
        drop(reg);
        a.alloc.free(p)
    };
    std::thread::scope(|scope| {
        for t in 0..threads as u64 {
            let (live, bad, first_error, start, free) = (&live, &bad, &first_error, &start, &free);
            scope.spawn(move || {
                start.wait(); // all threads begin together
                let code = guarded(|| {
                    let mut rng = Rng(seed.wrapping_mul(31).wrapping_add(t * 7919 + 1) | 1);
                    let mut mine: Vec<(u64, bool)> = Vec::new();
                    for _ in 0..ops {
                        let r = rng.next();
                        match r % 32 {
                            0 | 1 => device.launch(STRESS_SIDE_STREAM),
                            2 => device.complete(STRESS_SIDE_STREAM),
                            _ => {}
                        }
                        if mine.is_empty() || (mine.len() < 48 && r % 3 != 0) {
                            let size = match (r >> 5) % 10 {
                                0 => 1 + (r >> 8) % (12 << 20),
                                1..=3 => 1 + (r >> 8) % (2 << 20),
                                _ => 1 + (r >> 8) % 8192,
                            };
                            let p = match a.alloc.malloc(size, t % 2) {
                                Ok(p) => p,
                                Err(e) => return status(Err(e)),
                            };
                            let mut reg = live.lock().unwrap();
                            *bad.lock().unwrap() += stress_overlaps(device, &mut reg, p, size);
                            reg.insert(p, (size, None));
                            drop(reg);
                            let recorded = (r >> 40) % 4 == 0;
                            if recorded {
                                if let Err(e) = a.alloc.record_stream(p, STRESS_SIDE_STREAM) {
                                    return status(Err(e));
                                }
                            }
                            mine.push((p, recorded));
                        } else {
                            let (p, recorded) = mine.swap_remove((r >> 8) as usize % mine.len());
                            if let Err(e) = free(p, recorded, live) {
                                return status(Err(e));
                            }
                        }
                    }
                    for (p, recorded) in mine {
                        if let Err(e) = free(p, recorded, live) {
                            return status(Err(e));
                        }
                    }
                    KATA_OK
                });
                let mut f = first_error.lock().unwrap();
                if *f == KATA_OK {
                    *f = code;
                }
            });
        }
    });
    device.complete(STRESS_SIDE_STREAM);
    for (_, (_, ev)) in std::mem::take(&mut *live.lock().unwrap()) {
        if let Some(ev) = ev {
            device.release_event(ev);
        }
    }
    *violations = *bad.lock().unwrap();
    let code = *first_error.lock().unwrap();
    code
}

// Keep the enum's numbering in one place for allocator.h's comments.
const _: () = assert!(BlockState::AwaitingEvents as i32 == 2);

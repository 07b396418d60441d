//! GIVEN: the C ABI the Python tests call through cffi (declared in fingerprint.h). Do not edit.
//!
//! Every call runs inside `catch_unwind`: a `todo!()` left in fingerprint.rs comes back as
//! KATA_TODO ("not started"), any other panic as KATA_PANIC with its message, so a bug never
//! aborts the test process. Components and fingerprints cross as text, one per line:
//! `<kind name>\t<the value's bytes in hex>` (a digest: its 32 bytes in hex).

pub mod api;
pub mod fingerprint;
pub mod sha256;

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::Once;

use api::{Component, Entry, Fingerprint, Kind, Verdict};

pub const KATA_OK: i32 = 0;
pub const KATA_BAD_INPUT: i32 = 2;
pub const KATA_TODO: i32 = -2;
pub const KATA_PANIC: i32 = -3;

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
fn guarded<F: FnOnce() -> Result<(), String>>(f: F) -> i32 {
    QUIET_PANICS.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let at = info.location().map(|l| format!(" (at {}:{})", l.file(), l.line()));
            set_error(&format!("{}{}", panic_message(info.payload()), at.unwrap_or_default()));
        }))
    });
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => KATA_OK,
        Ok(Err(msg)) => {
            set_error(&msg);
            KATA_BAD_INPUT
        }
        Err(payload) => {
            if panic_message(&*payload).starts_with("not yet implemented") {
                KATA_TODO
            } else {
                KATA_PANIC
            }
        }
    }
}

#[no_mangle]
pub extern "C" fn kata_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Result<Vec<u8>, String> {
    if text.len() % 2 != 0 {
        return Err(format!("odd hex length: {text:?}"));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).map_err(|e| format!("{text:?}: {e}")))
        .collect()
}

/// `kind\thex` lines -> (kind, bytes) pairs.
fn parse_lines(text: &str) -> Result<Vec<(Kind, Vec<u8>)>, String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let (k, v) = line.split_once('\t').ok_or_else(|| format!("no tab in {line:?}"))?;
            let kind = Kind::from_name(k).ok_or_else(|| format!("unknown kind {k:?}"))?;
            Ok((kind, unhex(v)?))
        })
        .collect()
}

fn parse_components(text: &str) -> Result<Vec<Component>, String> {
    parse_lines(text)?
        .into_iter()
        .map(|(kind, v)| Ok(Component { kind, value: String::from_utf8(v).map_err(|e| e.to_string())? }))
        .collect()
}

fn parse_fingerprint(text: &str) -> Result<Fingerprint, String> {
    let entries = parse_lines(text)?
        .into_iter()
        .map(|(kind, d)| {
            let digest: [u8; 32] = d.try_into().map_err(|_| "a digest is not 32 bytes".to_string())?;
            Ok(Entry { kind, digest })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Fingerprint { entries })
}

unsafe fn text<'a>(p: *const c_char) -> Result<&'a str, String> {
    if p.is_null() {
        return Err("null string".into());
    }
    CStr::from_ptr(p).to_str().map_err(|e| e.to_string())
}

unsafe fn bytes<'a>(p: *const u8, n: usize) -> &'a [u8] {
    if n == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(p, n)
    }
}

/// Hand `data` to the caller: *out and *out_len, freed with kata_free.
unsafe fn give(data: Vec<u8>, out: *mut *mut u8, out_len: *mut usize) {
    let boxed = data.into_boxed_slice();
    *out_len = boxed.len();
    *out = Box::into_raw(boxed) as *mut u8;
}

/// # Safety
/// `p`/`n` come from one of this library's calls and are freed once.
#[no_mangle]
pub unsafe extern "C" fn kata_free(p: *mut u8, n: usize) {
    if !p.is_null() {
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n)));
    }
}

/// # Safety
/// `root` is a NUL-terminated path; `out`/`out_len` are valid for writes.
#[no_mangle]
pub unsafe extern "C" fn kata_collect(root: *const c_char, out: *mut *mut u8, out_len: *mut usize) -> i32 {
    guarded(|| {
        let root = text(root)?;
        let found = fingerprint::collect(Path::new(root));
        let lines: String = found.iter().map(|c| format!("{}\t{}\n", c.kind.name(), hex(c.value.as_bytes()))).collect();
        give(lines.into_bytes(), out, out_len);
        Ok(())
    })
}

/// # Safety
/// `ptrs[i]`/`lens[i]` for i < n are valid byte buffers; `out`/`out_len` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn kata_encode(
    ptrs: *const *const u8,
    lens: *const usize,
    n: usize,
    out: *mut *mut u8,
    out_len: *mut usize,
) -> i32 {
    guarded(|| {
        let fields: Vec<&[u8]> = (0..n).map(|i| bytes(*ptrs.add(i), *lens.add(i))).collect();
        give(fingerprint::encode(&fields), out, out_len);
        Ok(())
    })
}

/// # Safety
/// `salt`/`salt_len` a byte buffer, `comps` NUL-terminated lines, `out`/`out_len` writable.
#[no_mangle]
pub unsafe extern "C" fn kata_digests(
    salt: *const u8,
    salt_len: usize,
    comps: *const c_char,
    out: *mut *mut u8,
    out_len: *mut usize,
) -> i32 {
    guarded(|| {
        let salt = bytes(salt, salt_len);
        let comps = parse_components(text(comps)?)?;
        let lines: String =
            comps.iter().map(|c| format!("{}\t{}\n", c.kind.name(), hex(&fingerprint::digest(salt, c)))).collect();
        give(lines.into_bytes(), out, out_len);
        Ok(())
    })
}

/// # Safety
/// As kata_digests.
#[no_mangle]
pub unsafe extern "C" fn kata_fingerprint(
    salt: *const u8,
    salt_len: usize,
    comps: *const c_char,
    out: *mut *mut u8,
    out_len: *mut usize,
) -> i32 {
    guarded(|| {
        let salt = bytes(salt, salt_len);
        let comps = parse_components(text(comps)?)?;
        let fp = fingerprint::fingerprint(salt, &comps);
        let lines: String = fp.entries.iter().map(|e| format!("{}\t{}\n", e.kind.name(), hex(&e.digest))).collect();
        give(lines.into_bytes(), out, out_len);
        Ok(())
    })
}

/// # Safety
/// `fp` NUL-terminated lines; `out`/`out_len` writable.
#[no_mangle]
pub unsafe extern "C" fn kata_to_bytes(fp: *const c_char, out: *mut *mut u8, out_len: *mut usize) -> i32 {
    guarded(|| {
        let fp = parse_fingerprint(text(fp)?)?;
        give(fingerprint::to_bytes(&fp), out, out_len);
        Ok(())
    })
}

/// # Safety
/// `a`, `b` NUL-terminated lines; `out` has room for 3 values.
#[no_mangle]
pub unsafe extern "C" fn kata_compare(a: *const c_char, b: *const c_char, out: *mut u32) -> i32 {
    guarded(|| {
        let s = fingerprint::compare(&parse_fingerprint(text(a)?)?, &parse_fingerprint(text(b)?)?);
        *out = s.matched;
        *out.add(1) = s.mismatched;
        *out.add(2) = s.accepted as u32;
        Ok(())
    })
}

/// # Safety
/// `a`, `b` NUL-terminated lines; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn kata_verdict(a: *const c_char, b: *const c_char, out: *mut i32) -> i32 {
    guarded(|| {
        let v = fingerprint::verdict(&parse_fingerprint(text(a)?)?, &parse_fingerprint(text(b)?)?);
        *out = match v {
            Verdict::Same => 0,
            Verdict::Reinstalled => 1,
            Verdict::PartReplaced => 2,
            Verdict::HiddenHardware => 3,
            Verdict::Clone => 4,
            Verdict::TooThin => 5,
            Verdict::Different => 6,
        };
        Ok(())
    })
}

/// # Safety
/// `data`/`n` a byte buffer; `out` has room for 32 bytes. (For the tests: the given SHA-256.)
#[no_mangle]
pub unsafe extern "C" fn kata_hmac_sha256(key: *const u8, key_len: usize, data: *const u8, n: usize, out: *mut u8) -> i32 {
    guarded(|| {
        let d = sha256::hmac_sha256(bytes(key, key_len), bytes(data, n));
        std::ptr::copy_nonoverlapping(d.as_ptr(), out, 32);
        Ok(())
    })
}

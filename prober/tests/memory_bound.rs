//! The scheduled mode's memory read under a memory limit, as the `CronJob` reads it (512 Mi): an
//! allocator that refuses past a limit stands in for the container's, so a decoder that inflates
//! a bomb aborts this binary instead of taking the machine's memory. One test per binary: the
//! allocator's count is the process's.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

use prober::report::remembered::{Remembered, RememberedError};

/// Far below the `CronJob`'s 512 Mi, far above what a real memory needs to decode.
const LIMIT: usize = 256 * 1024 * 1024;

struct Limited;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// Safety: defers every allocation to `System`, only counting bytes and refusing (null, which
// the caller turns into an allocation error) past LIMIT.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Limited {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
        if live > LIMIT {
            LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
            return std::ptr::null_mut();
        }
        PEAK.fetch_max(live, Ordering::SeqCst);
        // Safety: the caller's layout, passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        // Safety: allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Limited = Limited;

/// The issue's bomb: `prober.remembered/v1` JSON whose `dropped` is 64 MiB of zeros, gzipped
/// (about 65 KB), written in chunks so the test itself never holds the inflated text.
fn bomb() -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(
        br#"{"schema":"prober.remembered/v1","finished":0,"counts":{"total":0,"ok":0,"failed":0,"unknown":0},"nodes":0,"exitCode":0,"byPath":{},"findings":[],"omitted":{"results":0,"resultIds":0,"findings":0},"dropped":[0"#,
    )
    .unwrap();
    let chunk = ",0".repeat(32 * 1024);
    for _ in 0..(64 * 1024 * 1024 / chunk.len()) {
        gz.write_all(chunk.as_bytes()).unwrap();
    }
    gz.write_all(b"]}").unwrap();
    gz.finish().unwrap()
}

#[test]
fn a_memory_bomb_is_refused_within_a_few_megabytes() {
    let gz = bomb();
    assert!(gz.len() < 128 * 1024, "{} bytes compressed", gz.len());
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let result = Remembered::decode(&gz);
    let peak = PEAK.load(Ordering::SeqCst) - before;
    println!("peak while decoding: {} KiB", peak / 1024);
    assert!(
        matches!(result, Err(RememberedError::TooLarge { .. })),
        "{result:?}"
    );
    // The decoder's own cap (8 MiB inflated) and its buffer, nothing proportional to the bomb.
    assert!(peak < 32 * 1024 * 1024, "{} KiB", peak / 1024);
}

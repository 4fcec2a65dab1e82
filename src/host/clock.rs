//! The one clock every timestamp of a run is read from: CLOCK_MONOTONIC, the
//! clock timerfds use, shared by the loader, the sampler and the lab.

/// Monotonic clock in nanoseconds (CLOCK_MONOTONIC, the clock timerfds use).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; vDSO, no syscall.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

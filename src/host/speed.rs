//! How fast this machine runs right now, on a given core: the calibration
//! probe: a fixed **exchange** timed in the probing thread's own CPU time
//! (CLOCK_THREAD_CPUTIME_ID, so time spent waiting for a busy core is not
//! counted and the probe reads true on a core a server keeps busy): 64
//! bytes written on one end of a TCP loopback connection, read on the
//! other, written back and read again, all by the probing thread (four
//! syscalls and the kernel's TCP path, no context switch: the kernel's part
//! of a web server's request, and CPU work, so a slower CPU shows too).
//!
//! Why: on this project's 2-core VM the kernel's path flips between two
//! speeds every few seconds with nothing else running (an exchange costs
//! about 5.0 µs, then about 8.5 µs, of the thread's own CPU time, while a
//! pure user-space hash loop stays within 3%), and every request a server answers costs
//! more in the slow state: the same server's rounds then differ, and two
//! runs differ in how much of their time fell in it. The probe tells a
//! slowed machine from a slowed framework.
//!
//! [`start`] runs the probe on the core every `every` from a thread of its
//! own until stopped; each sample costs about 0.1–0.2 ms of CPU (under
//! 0.1% of the core at 250 ms). It only measures.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use super::clock::now_ns;

/// Exchanges per sample; the sample is their mean.
const EXCHANGES: usize = 20;
/// Exchanges when the connection opens, untimed (buffers, caches warm).
const WARM_EXCHANGES: usize = 20;
/// Longest wait for one read: bounds the probe if loopback stalls.
const STALL: Duration = Duration::from_secs(2);

/// One probe sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// When it was taken (CLOCK_MONOTONIC, as `host::clock::now_ns`).
    pub t_mono_ns: u64,
    /// One loopback exchange, ns of the thread's CPU time.
    pub exchange_ns: f64,
}

/// This thread's CPU time, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Pin the calling thread to `core`.
fn pin(core: usize) -> std::io::Result<()> {
    if core >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::other(format!(
            "core {core} is out of range"
        )));
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it (the core
    // is in range) and sched_setaffinity reads it for this thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The probe's loopback connection, both ends, ready to be timed on the
/// calling thread.
pub struct Probe {
    near: TcpStream,
    far: TcpStream,
}

impl Probe {
    /// A loopback connection on 127.0.0.1, both ends held here.
    pub fn new() -> std::io::Result<Probe> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let near = TcpStream::connect(listener.local_addr()?)?;
        let (far, _) = listener.accept()?;
        for s in [&near, &far] {
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(STALL))?;
        }
        let mut p = Probe { near, far };
        for _ in 0..WARM_EXCHANGES {
            p.exchange()?;
        }
        Ok(p)
    }

    fn exchange(&mut self) -> std::io::Result<()> {
        let mut buf = [7u8; 64];
        self.near.write_all(&buf)?;
        self.far.read_exact(&mut buf)?;
        self.far.write_all(&buf)?;
        self.near.read_exact(&mut buf)
    }

    /// Time the exchange once, on whatever core this thread is on.
    pub fn sample(&mut self) -> std::io::Result<Sample> {
        let t_mono_ns = now_ns();
        let c0 = thread_cpu_ns();
        for _ in 0..EXCHANGES {
            self.exchange()?;
        }
        let c1 = thread_cpu_ns();
        Ok(Sample {
            t_mono_ns,
            exchange_ns: c1.saturating_sub(c0) as f64 / EXCHANGES as f64,
        })
    }
}

/// The probe running on a core ([`start`]).
pub struct Running {
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<std::io::Result<Vec<Sample>>>,
}

/// Probe `core` now and then every `every`, from a thread of its own
/// pinned there (the caller's affinity is untouched), until
/// [`Running::stop`].
pub fn start(core: usize, every: Duration) -> Running {
    let (stop, stopped) = mpsc::channel::<()>();
    let thread = std::thread::spawn(move || -> std::io::Result<Vec<Sample>> {
        pin(core)?;
        let mut probe = Probe::new()?;
        let mut samples = Vec::new();
        loop {
            samples.push(probe.sample()?);
            match stopped.recv_timeout(every) {
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                // Asked to stop, or the handle is gone.
                _ => return Ok(samples),
            }
        }
    });
    Running { stop, thread }
}

impl Running {
    /// Stop probing (one last sample first) and hand back every sample; an
    /// error when the core could not be used (not in this process's
    /// cpuset) or loopback TCP failed.
    pub fn stop(self) -> std::io::Result<Vec<Sample>> {
        let _ = self.stop.send(());
        self.thread
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the probe's thread panicked")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A core this process may run on (its affinity's first).
    fn a_core_of_ours() -> usize {
        // SAFETY: sched_getaffinity fills the set we own for this thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            assert_eq!(
                libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
                0
            );
            (0..libc::CPU_SETSIZE as usize)
                .find(|&c| libc::CPU_ISSET(c, &set))
                .unwrap()
        }
    }

    #[test]
    fn samples_the_exchange_on_a_core_of_ours_until_stopped() {
        let before = now_ns();
        let running = start(a_core_of_ours(), Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(110));
        let samples = running.stop().unwrap();
        // One now, one per 20 ms, one as it stops: about 7 (a slow CI
        // machine may fall behind, never ahead).
        assert!((2..=8).contains(&samples.len()), "{samples:?}");
        for s in &samples {
            assert!(s.t_mono_ns >= before, "{s:?}");
            // Four syscalls and the TCP path: never under 0.5 µs nor a
            // millisecond.
            assert!((500.0..1_000_000.0).contains(&s.exchange_ns), "{s:?}");
        }
        assert!(samples.windows(2).all(|w| w[0].t_mono_ns < w[1].t_mono_ns));
    }

    #[test]
    fn a_core_outside_our_affinity_is_an_error_not_a_figure() {
        let r = start(libc::CPU_SETSIZE as usize - 1, Duration::from_millis(10));
        assert!(r.stop().is_err());
        assert!(start(usize::MAX, Duration::from_millis(10)).stop().is_err());
    }

    #[test]
    fn time_waiting_for_a_busy_core_is_not_counted() {
        // Two spinning threads share the probe's core with it: the probe
        // waits for its turn, but counts only its own CPU time, so its
        // figures stay those of a quiet core (within a factor of 2; the
        // wall time would be at least 3× longer).
        let core = a_core_of_ours();
        let quiet = {
            let r = start(core, Duration::from_millis(5));
            std::thread::sleep(Duration::from_millis(60));
            r.stop().unwrap()
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hogs: Vec<_> = (0..2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    pin(core).unwrap();
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let busy = {
            let r = start(core, Duration::from_millis(5));
            std::thread::sleep(Duration::from_millis(120));
            r.stop().unwrap()
        };
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for h in hogs {
            h.join().unwrap();
        }
        let median = |s: &[Sample]| {
            let mut v: Vec<f64> = s.iter().map(|x| x.exchange_ns).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (q, b) = (median(&quiet), median(&busy));
        assert!(
            b < 2.0 * q,
            "quiet {q:.0} ns, beside two spinners {b:.0} ns"
        );
    }
}

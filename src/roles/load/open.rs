//! Open loop (fixed rate): the closed-form schedule and a sub-millisecond
//! pacer.
//!
//! Owns: when each request of a fixed-rate run is *meant* to be sent, and
//! waking a connection at that moment. The schedule is closed form (request
//! `k` of connection `i` of `C` at target rate `R` is due at
//! `start + (i + k·C) / R`), so connections are staggered by `1/R` and a late
//! request never shifts the ones after it: latency measured from the
//! intended time is corrected for coordinated omission.
//!
//! tokio's timer wheel has 1 ms resolution, too coarse for rates where the
//! gap between two sends on a connection is sub-millisecond. Each worker
//! thread therefore owns one `timerfd` armed (absolute, CLOCK_MONOTONIC,
//! nanoseconds) to the earliest pending deadline, plus a heap of deadlines;
//! when it fires the pacer task wakes every connection that is due. No
//! spinning, no allocation once the heap has grown to one entry per
//! connection.
//!
//! Must not: send or count requests.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use tokio::io::unix::AsyncFd;

use crate::host::clock::now_ns;

/// Shortest gap between two pacer wake-ups of one thread. Each wake-up
/// costs a context switch and two syscalls; at high rates, waking for every
/// single request would make pacing the loader's main cost. Requests due
/// within this gap are sent together, at most this late (the delay shows in
/// `max_schedule_lag_us` and, honestly, in corrected latency).
pub const MIN_WAKE_GAP_NS: u64 = 50_000;

/// Intended send time (ns, CLOCK_MONOTONIC) of request `k` of connection
/// `conn` (0-based, across all threads) of `connections`, at `rate` req/s
/// from `start_ns`.
#[inline]
pub fn intended_ns(start_ns: u64, conn: usize, connections: usize, rate: f64, k: u64) -> u64 {
    let slot = conn as f64 + k as f64 * connections as f64;
    start_ns + (slot * 1e9 / rate) as u64
}

/// How many requests of connection `conn` of `connections` are due inside
/// `[from_ns, to_ns)` on the schedule [`intended_ns`] starts at `from_ns`:
/// the window requests that connection owes, sent or not. The closed form
/// is checked against [`intended_ns`] itself so rounding can never make the
/// count disagree with the times the connection really uses.
pub fn due_in(from_ns: u64, to_ns: u64, conn: usize, connections: usize, rate: f64) -> u64 {
    if to_ns <= from_ns || connections == 0 {
        return 0;
    }
    let slots = (to_ns - from_ns) as f64 * rate / 1e9;
    let mut n = ((slots - conn as f64) / connections as f64).ceil().max(0.0) as u64;
    while n > 0 && intended_ns(from_ns, conn, connections, rate, n - 1) >= to_ns {
        n -= 1;
    }
    while intended_ns(from_ns, conn, connections, rate, n) < to_ns {
        n += 1;
    }
    n
}

/// One worker thread's pacer: a timerfd and the deadlines waiting on it.
pub struct Pacer {
    fd: AsyncFd<OwnedFd>,
    heap: RefCell<BinaryHeap<Reverse<(u64, usize)>>>,
    /// Per local connection: its waker and the deadline it registered.
    slots: RefCell<Vec<(Option<Waker>, u64)>>,
    /// Deadline the timerfd is armed for (u64::MAX: disarmed).
    armed: Cell<u64>,
    /// When the pacer task last woke connections.
    last_wake: Cell<u64>,
}

impl Pacer {
    /// A pacer for `connections` local connections. Needs a tokio runtime
    /// with I/O enabled.
    pub fn new(connections: usize) -> std::io::Result<Rc<Self>> {
        // SAFETY: timerfd_create returns a new descriptor or -1.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Rc::new(Self {
            // SAFETY: the OwnedFd moves into the AsyncFd, stays open and is
            // the same descriptor for the AsyncFd's whole life.
            fd: unsafe {
                AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
                    .map_err(std::io::Error::from)?
            },
            heap: RefCell::new(BinaryHeap::with_capacity(connections * 2)),
            slots: RefCell::new(vec![(None, 0); connections]),
            armed: Cell::new(u64::MAX),
            last_wake: Cell::new(0),
        }))
    }

    fn arm(&self, deadline: u64) {
        self.armed.set(deadline);
        let (sec, nsec) = if deadline == u64::MAX {
            (0, 0) // all zero disarms
        } else {
            // A zero it_value would disarm: never ask for time 0.
            let d = deadline.max(1);
            (
                (d / 1_000_000_000) as libc::time_t,
                (d % 1_000_000_000) as libc::c_long,
            )
        };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: sec,
                tv_nsec: nsec,
            },
        };
        // SAFETY: valid timerfd and a stack itimerspec.
        unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
    }

    /// Wait until `deadline_ns` for local connection `slot`.
    pub fn until(self: &Rc<Self>, slot: usize, deadline_ns: u64) -> PaceUntil {
        PaceUntil {
            pacer: Rc::clone(self),
            slot,
            deadline: deadline_ns,
        }
    }

    fn register(&self, slot: usize, deadline: u64, waker: &Waker) {
        let mut slots = self.slots.borrow_mut();
        let entry = &mut slots[slot];
        match &entry.0 {
            Some(w) if w.will_wake(waker) => {}
            _ => entry.0 = Some(waker.clone()),
        }
        if entry.1 != deadline {
            entry.1 = deadline;
            self.heap.borrow_mut().push(Reverse((deadline, slot)));
            let at = deadline.max(self.last_wake.get() + MIN_WAKE_GAP_NS);
            if at < self.armed.get() {
                self.arm(at);
            }
        }
    }

    /// The pacer task: wake connections whose deadline has passed. Runs for
    /// the life of the worker thread.
    pub async fn run(self: Rc<Self>) {
        loop {
            let Ok(mut guard) = self.fd.readable().await else {
                return;
            };
            let mut expirations = [0u8; 8];
            // SAFETY: reading 8 bytes from our timerfd into a stack buffer.
            unsafe { libc::read(self.fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
            // Safe to clear even if it fired again meanwhile: tokio only
            // clears the readiness event this guard saw. Deadlines are
            // processed whatever the read said, so no expiry is lost.
            guard.clear_ready();
            let now = now_ns();
            self.last_wake.set(now);
            let mut heap = self.heap.borrow_mut();
            let mut slots = self.slots.borrow_mut();
            while let Some(&Reverse((deadline, slot))) = heap.peek() {
                if deadline > now {
                    break;
                }
                heap.pop();
                // A stale entry (the slot re-registered since) is skipped.
                if slots[slot].1 == deadline {
                    slots[slot].1 = 0;
                    if let Some(w) = slots[slot].0.take() {
                        w.wake();
                    }
                }
            }
            let next = heap
                .peek()
                .map_or(u64::MAX, |r| r.0 .0.max(now + MIN_WAKE_GAP_NS));
            drop((heap, slots));
            self.arm(next);
        }
    }
}

/// Future returned by [`Pacer::until`].
pub struct PaceUntil {
    pacer: Rc<Pacer>,
    slot: usize,
    deadline: u64,
}

impl Future for PaceUntil {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if now_ns() >= self.deadline {
            return Poll::Ready(());
        }
        self.pacer.register(self.slot, self.deadline, cx.waker());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_is_staggered_and_does_not_drift() {
        // 4 connections at 1000 req/s: each sends every 4 ms, offset by 1 ms.
        let t = |c, k| intended_ns(0, c, 4, 1000.0, k);
        assert_eq!(
            [t(0, 0), t(1, 0), t(3, 0), t(0, 1)],
            [0, 1_000_000, 3_000_000, 4_000_000]
        );
        // Far into a run the closed form is still exact to the nanosecond.
        assert_eq!(t(2, 1_000_000), 4_000_002_000_000);
    }

    #[test]
    fn due_in_counts_exactly_the_requests_scheduled_inside_the_window() {
        // Brute force over awkward rates and connection counts: the count
        // is the number of k whose intended time is inside [from, to).
        for &(rate, conns) in &[(1000.0, 4usize), (333.3, 7), (40_000.0, 50), (0.7, 3)] {
            for &len in &[0u64, 1, 999_999, 1_000_000_000, 3_000_000_007] {
                let from = 5_000_000_000u64;
                for c in 0..conns {
                    let brute = (0..)
                        .take_while(|&k| intended_ns(from, c, conns, rate, k) < from + len)
                        .count() as u64;
                    assert_eq!(
                        due_in(from, from + len, c, conns, rate),
                        brute,
                        "{rate} {conns} {len} {c}"
                    );
                }
            }
        }
        // 40,000 req/s over 3 s on 50 connections: 120,000 due in all.
        let all: u64 = (0..50)
            .map(|c| due_in(0, 3_000_000_000, c, 50, 40_000.0))
            .sum();
        assert_eq!(all, 120_000);
    }

    #[test]
    fn pacer_wakes_at_sub_millisecond_deadlines_in_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let pacer = Pacer::new(3).unwrap();
            tokio::task::spawn_local(Rc::clone(&pacer).run());
            let start = now_ns();
            let order = Rc::new(RefCell::new(Vec::new()));
            let mut handles = Vec::new();
            // 300 µs apart: a millisecond timer could not tell them apart.
            for (slot, offset) in [(0usize, 900_000u64), (1, 300_000), (2, 600_000)] {
                let (p, order) = (Rc::clone(&pacer), Rc::clone(&order));
                handles.push(tokio::task::spawn_local(async move {
                    p.until(slot, start + offset).await;
                    let late = now_ns() - (start + offset);
                    order.borrow_mut().push(slot);
                    late
                }));
            }
            let mut lates = Vec::new();
            for h in handles {
                lates.push(h.await.unwrap());
            }
            assert_eq!(*order.borrow(), vec![1, 2, 0]);
            // Generous bound for a shared, busy machine; typical is ~50 µs.
            assert!(lates.iter().all(|&l| l < 20_000_000), "{lates:?}");
        });
    }
}

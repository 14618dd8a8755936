//! The synthesis workers: a [`Lane`] of dedicated threads, each running one synthesis at a time
//! from the lane's queue, in arrival order.
//!
//! # Why not a rayon pool
//!
//! A synthesis computes its sparse products (`kernels::r1cs::R1cs::evaluate`) with rayon.
//! When the syntheses themselves were tasks of a rayon pool and their products ran on the same
//! pool, a worker waiting in `join` for a chunk another worker stole looked for work meanwhile,
//! found the next queued *synthesis* in the pool's queue and had to finish it (waiting for its
//! ring slot too) before its own products could return: syntheses 2-8x slower than the same
//! synthesis in the in-process pipeline, and a GPU left waiting (issue 30).
//!
//! **Invariant:** a synthesis runs on a lane thread, never on a rayon worker, so no `join` can
//! pick one up. The products go to the process's global rayon pool (one thread per core of the
//! cpuset, the same shape as the in-process pipeline's), whose queue holds nothing but product
//! chunks: while a worker waits there it can only help with products, its own or another
//! synthesis's, each bounded.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// One unit of work for a lane.
pub type Task = Box<dyn FnOnce() + Send + 'static>;

/// Dedicated threads taking [`Task`]s from one FIFO queue.
pub struct Lane {
    name: String,
    queue: Arc<Queue>,
    threads: Vec<JoinHandle<()>>,
}

#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

#[derive(Default)]
struct QueueState {
    tasks: VecDeque<Task>,
    closed: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // A task never runs under this lock, so a poisoned lock only means a panic between two
        // statements of `push` or `pop`, which leave the queue consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next task, waiting for one; `None` once the lane is closed and empty.
    fn pop(&self) -> Option<Task> {
        let mut state = self.lock();
        loop {
            if let Some(task) = state.tasks.pop_front() {
                return Some(task);
            }
            if state.closed {
                return None;
            }
            state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Lane {
    /// Starts `threads` threads (at least one) named `name-0`, `name-1`, ...
    pub fn start(name: &str, threads: usize) -> std::io::Result<Lane> {
        let queue = Arc::new(Queue::default());
        let mut lane = Lane {
            name: name.to_owned(),
            queue,
            threads: Vec::new(),
        };
        for i in 0..threads.max(1) {
            let queue = lane.queue.clone();
            let handle = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    while let Some(task) = queue.pop() {
                        // Tasks catch their own panics (`crate::work`); this guard only keeps
                        // the thread serving if one did not.
                        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(task)).is_err() {
                            tracing::error!("a task of a synthesis lane panicked");
                        }
                    }
                });
            match handle {
                Ok(h) => lane.threads.push(h),
                Err(e) => {
                    lane.close_and_join();
                    return Err(e);
                }
            }
        }
        Ok(lane)
    }

    /// Queues `task` behind the others; a closed lane drops it.
    pub fn submit(&self, task: Task) {
        let mut state = self.queue.lock();
        if state.closed {
            tracing::debug!(lane = %self.name, "task dropped: the lane is closed");
            return;
        }
        state.tasks.push_back(task);
        drop(state);
        self.queue.ready.notify_one();
    }

    /// Tasks waiting for a thread.
    pub fn queued(&self) -> usize {
        self.queue.lock().tasks.len()
    }

    /// Threads of the lane.
    pub fn threads(&self) -> usize {
        self.threads.len()
    }

    /// Closes the lane: the threads run what is queued (tasks check the stop flag themselves),
    /// then exit; returns once they have.
    pub fn join(mut self) {
        self.close_and_join();
    }

    fn close_and_join(&mut self) {
        self.queue.lock().closed = true;
        self.queue.ready.notify_all();
        for t in self.threads.drain(..) {
            if t.join().is_err() {
                tracing::error!(lane = %self.name, "a lane thread panicked");
            }
        }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.close_and_join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    /// What issue 30 found: a task whose parallel work waits must never run another queued task
    /// on its own thread. Each task records how many tasks its thread was already inside when it
    /// started; it runs a rayon `join` whose other half waits until every task has started, so a
    /// thread waiting there would take the next queued task if it could.
    #[test]
    fn a_task_waiting_in_its_parallel_work_never_runs_another_task() {
        const TASKS: usize = 6;
        thread_local!(static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) });
        let lane = Lane::start("t", 3).unwrap();
        let started = Arc::new(AtomicUsize::new(0));
        let nested = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = mpsc::channel();
        for _ in 0..TASKS {
            let (started, nested, tx) = (started.clone(), nested.clone(), tx.clone());
            lane.submit(Box::new(move || {
                assert!(
                    rayon::current_thread_index().is_none(),
                    "a task ran on a rayon worker"
                );
                if DEPTH.with(|d| d.replace(d.get() + 1)) > 0 {
                    // Relaxed: a counter read after the channel's synchronisation.
                    nested.fetch_add(1, Ordering::Relaxed);
                }
                // Relaxed: a counter; the loop below only polls it.
                started.fetch_add(1, Ordering::Relaxed);
                rayon::join(
                    || {
                        let deadline = std::time::Instant::now() + Duration::from_secs(5);
                        // Relaxed: polled; the tasks share no other memory.
                        while started.load(Ordering::Relaxed) < 3.min(TASKS)
                            && std::time::Instant::now() < deadline
                        {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    },
                    || (0..1000u64).sum::<u64>(),
                );
                DEPTH.with(|d| d.set(d.get() - 1));
                tx.send(()).unwrap();
            }));
        }
        for _ in 0..TASKS {
            rx.recv_timeout(Duration::from_secs(30)).unwrap();
        }
        assert_eq!(nested.load(Ordering::Relaxed), 0);
        lane.join();
    }

    #[test]
    fn tasks_run_in_order_on_one_thread_and_queued_ones_run_before_join_returns() {
        let lane = Lane::start("t", 1).unwrap();
        assert_eq!(lane.threads(), 1);
        let seen = Arc::new(Mutex::new(Vec::new()));
        // The first task holds the thread until the others are queued.
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        lane.submit(Box::new(move || {
            started_tx.send(()).unwrap();
            // An error: the test failed and dropped the sender; end the task anyway.
            let _ = release_rx.recv_timeout(Duration::from_secs(30));
        }));
        started_rx.recv_timeout(Duration::from_secs(30)).unwrap();
        for i in 0..4 {
            let seen = seen.clone();
            lane.submit(Box::new(move || seen.lock().unwrap().push(i)));
        }
        let queued = lane.queued();
        release_tx.send(()).unwrap();
        assert_eq!(queued, 4);
        lane.join();
        assert_eq!(*seen.lock().unwrap(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_panicking_task_leaves_the_thread_serving() {
        let lane = Lane::start("t", 1).unwrap();
        let (tx, rx) = mpsc::channel();
        lane.submit(Box::new(|| panic!("boom")));
        lane.submit(Box::new(move || tx.send(7).unwrap()));
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), 7);
    }
}

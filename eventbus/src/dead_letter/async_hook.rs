//! The `on_dead_letter_async` hook (feature `tokio`): one task on the bus's runtime, fed by a
//! bounded queue, awaiting the hook's future for one letter before it takes the next, so the
//! hook sees the letters in the order they were made.
//!
//! Workers only offer a letter to the queue (`try_send`), never wait for room: a worker may
//! be a task of the same runtime, or the close giving up at its deadline, and neither may
//! wait for the hook. A letter that finds the queue full skips the hook (counted), as with the
//! sync hook's thread; the store keeps it regardless.
//!
//! A panic while making the hook's future or polling it ends that letter, not the task. The
//! task marks the thread as the hook's (`IN_HOOK`) while it is polled (a task may move between
//! threads), so a close from inside the hook begins the close instead of waiting for itself.
//! It ends once the queue's sender is gone (the close took it, or the bus was dropped) and the
//! queue is empty, or when the runtime shuts down; either way it lets go of `done`, which is
//! what a close waits for.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use crossbeam_channel::Receiver;

use super::{DeadLetter, HOOK_BACKLOG, IN_HOOK};
use crate::util::unwind::drop_quietly;

/// The hook's future for one letter.
pub(crate) type Showing = Pin<Box<dyn Future<Output = ()> + Send>>;

/// An async callback shown each dead letter, on a task of the bus's runtime.
pub(crate) type AsyncHook = Box<dyn FnMut(DeadLetter) -> Showing + Send>;

/// Starts the hook's task on `runtime`: the queue to it, and a receiver that disconnects
/// when the task has finished (it holds the only sender).
pub(crate) fn spawn(
    runtime: &tokio::runtime::Handle,
    hook: AsyncHook,
) -> (tokio::sync::mpsc::Sender<DeadLetter>, Receiver<()>) {
    let (tx, rx) = tokio::sync::mpsc::channel::<DeadLetter>(HOOK_BACKLOG);
    let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(0);
    // Detached: a close waits for `done`, not for the task's handle. On a runtime that has
    // shut down the task is dropped at once, and `done` with it.
    drop(runtime.spawn(AsHook(Box::pin(async move {
        let _done = done_tx;
        run(rx, hook).await;
    }))));
    (tx, done_rx)
}

/// Shows each letter to the hook in turn, until the queue closes.
async fn run(mut letters: tokio::sync::mpsc::Receiver<DeadLetter>, mut hook: AsyncHook) {
    while let Some(letter) = letters.recv().await {
        show(&mut hook, letter).await;
    }
    drop_quietly(hook);
}

/// Awaits the hook's future for `letter`. A panic while making it or polling it ends it;
/// the future (which may hold the letter, whose message's `Drop` is user code) is dropped
/// where a panic cannot escape.
async fn show(hook: &mut AsyncHook, letter: DeadLetter) {
    let mut showing = match catch_unwind(AssertUnwindSafe(|| hook(letter))) {
        Ok(showing) => showing,
        Err(panic) => {
            drop_quietly(panic);
            return;
        }
    };
    std::future::poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| showing.as_mut().poll(cx))) {
            Ok(poll) => poll,
            Err(panic) => {
                drop_quietly(panic);
                Poll::Ready(())
            }
        },
    )
    .await;
    drop_quietly(showing);
}

/// The hook's task, the thread's `IN_HOOK` while it is polled.
struct AsHook(Pin<Box<dyn Future<Output = ()> + Send>>);

impl Future for AsHook {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let _marked = Marked(IN_HOOK.with(|in_hook| in_hook.replace(true)));
        self.0.as_mut().poll(cx)
    }
}

/// Puts back the thread's `IN_HOOK` as it was before the poll, when dropped (after a
/// panicking poll too).
struct Marked(bool);

impl Drop for Marked {
    fn drop(&mut self) {
        IN_HOOK.with(|in_hook| in_hook.set(self.0));
    }
}

//! A log subscription's side: its [`Reader`], which takes messages from the shared ring
//! in order (lending each in place where it can, copying a handle out where it must), and
//! how its subscription is retired. The ring, the cursors and appending are `mod.rs`.

use super::*;

/// How many spin-loop hints a lending worker that has read everything waits before it looks
/// at the log again, while the process's lending workers ([`LENDERS`]) and a publisher have a
/// core each (about 3.5 µs on the project's machine: the first message after it caught up
/// waits that much longer). Each look reads the lines every append writes (the tail, the
/// next slots) and pulls them away from the publisher, which then waits to get them back: a
/// worker that looked again after a hint or two, as a snooze does, made the publisher spend
/// most of a 1 → 1 append waiting (BENCHMARKS.md, "A log topic's 1 → 1 line: the worker's
/// looks").
/// With more workers than that, it yields instead: spinning would take a core another of
/// them, or the publisher, needs.
const CAUGHT_UP_PAUSE: u32 = 256;

/// How many lending workers the process has, over every log: written when a lending reader
/// is made or dropped. Counted across logs, since the cores are: four topics with a worker
/// each spin on two cores as surely as one topic with four.
static LENDERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The bus's handle on a log subscription: retiring it, and reading where it stands.
struct Retirer<T> {
    log: Arc<Log<T>>,
    cursor: Arc<Cursor>,
}

impl<T: Send + Sync + 'static> Retire for Retirer<T> {
    fn retire(&self) {
        // Lock order: row 6 (the log's ring), nothing else held; see engine/mod.rs.
        let mut ring = self.log.lock_ring();
        if self.cursor.end.load(Relaxed) == OPEN {
            self.cursor.end.store(self.log.tail.load(Relaxed), Release);
        }
        // No longer waited for, so no longer protected (see the module docs: lending).
        self.log.unprotect(&mut ring, &self.cursor);
        self.log.arrived.notify_all();
        self.log.advanced.notify_all();
        #[cfg(feature = "tokio")]
        self.log.arrived_tasks.notify_now();
    }

    fn log(&self) -> Option<LogView> {
        let cursor = &self.cursor;
        let read = cursor.read.load(Acquire);
        let position = cursor.position.load(Acquire);
        let oldest = self.log.oldest.load(Acquire);
        let upto = self.log.tail.load(Acquire).min(cursor.end.load(Acquire));
        let start = cursor.start.load(Acquire);
        let filtered = cursor.filtered.load(Acquire) + cursor.elsewhere.load(Acquire);
        // What was saved for it when it left the log is not lapped (`Log::remove`).
        let lapped = match cursor.saved.load(Acquire) {
            true => 0,
            false => oldest.min(upto).saturating_sub(read),
        };
        // A lap a keyed group's other worker counts is not this one's (see `fill`).
        let (lapped, elsewhere) = match cursor.laps_elsewhere.load(Relaxed) {
            true => (0, lapped),
            false => (lapped, 0),
        };
        Some(LogView {
            received: upto
                .saturating_sub(start)
                .saturating_sub(filtered)
                .saturating_sub(elsewhere),
            position,
            lag: upto.saturating_sub(position),
            lapped,
        })
    }
}

impl<T> Drop for Reader<T> {
    fn drop(&mut self) {
        if self.cursor.lends {
            LENDERS.fetch_sub(1, Relaxed);
        }
        #[cfg(feature = "tokio")]
        if self.by_task {
            self.log.task_readers.fetch_sub(1, SeqCst);
        }
        if self.cursor.lends {
            // A block still held is let go of first, so that an `unprotect` after this keeps
            // nothing for a reader that is gone.
            self.cursor.lent.swap(NONE, SeqCst);
            self.let_go_held();
        }
        self.let_go_saved();
    }
}

impl<T> Reader<T> {
    /// Lets go of what was saved for this reader when it left the log and it never took (a
    /// stream dropped, a forced stop), outside the ring lock: a payload's `Drop` is user code.
    fn let_go_saved(&self) {
        if !self.cursor.saved.load(Acquire) {
            return;
        }
        let id = self.cursor.node.id;
        let saved: Vec<_> = {
            // Lock order: row 6 (the log's ring), nothing else held; see engine/mod.rs.
            let mut ring = self.log.lock_ring();
            let (mine, others) = std::mem::take(&mut ring.saved)
                .into_iter()
                .partition(|(of, _)| *of == id);
            ring.saved = others;
            mine
        };
        crate::util::unwind::drop_quietly(saved);
    }

    /// Lets go of what the ring keeps for this reader's copied handles (see the module docs:
    /// lending), outside the ring lock: a payload's `Drop` is user code.
    fn let_go_held(&self) {
        let id = self.cursor.node.id;
        let held: Vec<_> = {
            // Lock order: row 6 (the log's ring), nothing else held; see engine/mod.rs.
            let mut ring = self.log.lock_ring();
            if ring.held.is_empty() {
                return;
            }
            let (mine, others) = std::mem::take(&mut ring.held)
                .into_iter()
                .partition(|(of, _)| *of == id);
            ring.held = others;
            mine
        };
        drop(held);
    }
}

/// The worker's end of a log subscription.
pub(crate) struct Reader<T> {
    log: Arc<Log<T>>,
    cursor: Arc<Cursor>,
    core: Arc<SubscriptionCore>,
    /// References taken out of the ring, not yet handed to the handler.
    batch: VecDeque<Message<T>>,
    /// Handles on a run of messages, seqs `lent_from..`, made from their cells to be
    /// lent to the handler one by one (see the module docs: lending). Never dropped: they are
    /// not counted. Cleared (its room kept) when the block is let go of.
    lent: Vec<ManuallyDrop<Message<T>>>,
    /// The seq of `lent[0]`.
    lent_from: u64,
    /// The index in `lent` of the next message to lend.
    lent_next: usize,
    /// Where `next_lent`'s common case stops lending from `lent`: its end for a
    /// subscription that takes every message, 0 for one that asks (a filter, a key), whose
    /// every message goes through `wants`. Set once a block, so the common case compares
    /// one bound where it compared three, the index's own check aside (about 8
    /// instructions a delivery).
    lend_to: usize,
    /// A lending worker's bound: messages before it are in the log for it (see `next_lent`).
    visible: u64,
    batch_size: usize,
    /// The seq of the message last handed out: finished when the next is asked for.
    in_hand: Option<u64>,
    stop: Receiver<()>,
    /// Called, with no lock held, when messages its filter skipped leave it with nothing to
    /// do: a closing bus looks whether it has drained (the engine's `Lifecycle::poke`).
    idle: Box<dyn Fn() + Send + Sync>,
    /// Read by a task or a stream (counted in `Log::task_readers`).
    #[cfg(feature = "tokio")]
    by_task: bool,
    /// For a worker of a keyed group: its lane and the group's size. It reads the whole log
    /// at its own position and takes only the messages its lane's key picks, so one key's
    /// history and live messages reach one worker, in order.
    lane: Option<(usize, usize)>,
}

/// What a reader needs from its bus for closing.
pub(crate) struct Closing {
    /// Disconnected by a forced stop.
    pub(crate) stop: Receiver<()>,
    /// Tells a closing bus to look whether it has drained (`Lifecycle::poke`).
    pub(crate) poke: Box<dyn Fn() + Send + Sync>,
}

/// A log subscription at the log's start position `start`, as its worker's end; `core` makes
/// the subscription's shared state around its retirer. The subscription receives nothing
/// until [`Reader::join`].
pub(crate) fn reader<T: Send + Sync + 'static>(
    log: &Arc<Log<T>>,
    id: u64,
    capacity: usize,
    overflow: Overflow,
    by_task: bool,
    closing: Closing,
    core: impl FnOnce(Box<dyn Retire>) -> SubscriptionCore,
) -> Reader<T> {
    #[cfg(feature = "tokio")]
    if by_task {
        log.task_readers.fetch_add(1, SeqCst);
    }
    #[cfg(not(feature = "tokio"))]
    let _ = by_task;
    let block = (overflow == Overflow::Block).then_some(capacity as u64);
    let cursor = Arc::new(Cursor {
        node: WaitNode::new(id),
        block,
        start: AtomicU64::new(0),
        position: AtomicU64::new(0),
        read: AtomicU64::new(0),
        end: AtomicU64::new(OPEN),
        saved: AtomicBool::new(false),
        filtered: AtomicU64::new(0),
        elsewhere: AtomicU64::new(0),
        laps_elsewhere: AtomicBool::new(false),
        lends: block.is_some() && !by_task,
        lend: AtomicU8::new(IDLE),
        lent: AtomicU64::new(NONE),
        lent_to: AtomicU64::new(NONE),
    });
    if cursor.lends {
        LENDERS.fetch_add(1, Relaxed);
    }
    let retirer = Retirer {
        log: Arc::clone(log),
        cursor: Arc::clone(&cursor),
    };
    let mut core = core(Box::new(retirer));
    // One node for the subscription: the cursor's, which publishers record waits on.
    core.node = Arc::clone(&cursor.node);
    Reader {
        log: Arc::clone(log),
        cursor,
        core: Arc::new(core),
        batch: VecDeque::new(),
        lent: Vec::new(),
        lent_from: 0,
        lent_next: 0,
        lend_to: 0,
        visible: 0,
        batch_size: if block.is_some() {
            BATCH.min(capacity)
        } else {
            1
        },
        in_hand: None,
        stop: closing.stop,
        idle: closing.poke,
        #[cfg(feature = "tokio")]
        by_task,
        lane: None,
    }
}

impl<T: Send + Sync + 'static> Reader<T> {
    pub(crate) fn core(&self) -> &Arc<SubscriptionCore> {
        &self.core
    }

    /// Makes this the reader of lane `index` of a keyed group of `of` (before it joins).
    pub(crate) fn route(&mut self, index: usize, of: usize) {
        self.lane = Some((index, of));
        self.cursor.laps_elsewhere.store(index != 0, Relaxed);
    }

    /// Joins a keyed group's readers to their log at `start`, at one position.
    pub(crate) fn join_group(readers: &[Reader<T>], start: Start) {
        if let Some(first) = readers.first() {
            let cursors: Vec<Arc<Cursor>> = readers.iter().map(|r| Arc::clone(&r.cursor)).collect();
            first.log.join_all(&cursors, start);
        }
    }

    /// For a reader a group shares (`shared.rs`): the next message in the log now, without
    /// waiting, finished at once (the position moves past it as it is handed out: the
    /// workers' handlers hold references of their own).
    pub(super) fn hand_out(&mut self) -> Option<Message<T>> {
        let message = self.take(false)?;
        self.finish_in_hand();
        Some(message)
    }

    /// For a reader a group shares: its log, its cursor and its stop signal, to wait on
    /// without the reader.
    pub(super) fn parts(&self) -> (Arc<Log<T>>, Arc<Cursor>, Receiver<()>) {
        (
            Arc::clone(&self.log),
            Arc::clone(&self.cursor),
            self.stop.clone(),
        )
    }

    /// Joins the log at `start`: from here on the subscription receives.
    pub(crate) fn join(&self, start: Start) {
        self.log.join(&self.cursor, start);
    }

    /// The next message, waiting for one; `None` once retired and everything before the
    /// retire has been read. Asking for the next finishes the one before. Lent in its cell
    /// where the subscription lends (a thread worker's, `Block`, still protected: see the
    /// module docs).
    ///
    /// In line in the worker's loop for its common case: the message before was lent from
    /// the block in hand, the block has another, and the subscription takes every message
    /// (no filter, no key to ask). Everything else (a block's end, a filter, an owned
    /// reader, a wait) is `next_lent_rest`, out of line: a delivery through the whole
    /// function paid about 17 instructions of its frame alone (BENCHMARKS.md, "A lending
    /// worker's delivery").
    #[inline(always)]
    pub(crate) fn next_lent(&mut self) -> Option<Taken<'_, T>> {
        if self.in_run() {
            return Some(Taken::Lent(self.step_in_run()));
        }
        self.next_lent_rest()
    }

    /// [`next_lent`](Self::next_lent)'s common case alone: the next message of the block in
    /// hand, if the subscription takes it with no question asked; `None` for anything else
    /// (then ask `next_lent`).
    #[inline(always)]
    pub(crate) fn next_in_run(&mut self) -> Option<&Message<T>> {
        match self.in_run() {
            true => Some(self.step_in_run()),
            false => None,
        }
    }

    /// Whether `next_lent`'s common case holds: the message in hand is the one before, lent
    /// from this block (a block is copied only once the last is let go of, with nothing in
    /// hand: `next_lent_rest`; an owned take leaves `lent` empty), the block has another,
    /// and the subscription takes every message.
    #[inline(always)]
    fn in_run(&self) -> bool {
        self.in_hand.is_some() && self.lent_next < self.lend_to
    }

    /// Finishes the message in hand and lends the next of the block: what `finish_in_hand`
    /// and `next_lent_rest`'s loop do for the block in hand. Only where [`in_run`] holds.
    ///
    /// [`in_run`]: Self::in_run
    #[inline(always)]
    fn step_in_run(&mut self) -> &Message<T> {
        let at = self.lent_next;
        let seq = self.lent_from + at as u64;
        debug_assert_eq!(self.in_hand, Some(seq - 1));
        self.advance_lent(seq);
        self.lent_next = at + 1;
        self.in_hand = Some(seq);
        &self.lent[at]
    }

    /// [`next_lent`](Self::next_lent) but for its common case.
    #[inline(never)]
    fn next_lent_rest(&mut self) -> Option<Taken<'_, T>> {
        if !self.cursor.lends {
            return self.take(true).map(Taken::Owned);
        }
        self.finish_in_hand();
        let mut skipped = false;
        loop {
            // The block copied last, lent one message at a time.
            if let Some(at) = (self.lent_next < self.lent.len()).then_some(self.lent_next) {
                self.lent_next += 1;
                let seq = self.lent_from + at as u64;
                if self.wants(&self.lent[at]) {
                    self.in_hand = Some(seq);
                    return Some(Taken::Lent(&self.lent[at]));
                }
                self.advance_lent(seq + 1);
                skipped = true;
                continue;
            }
            if !self.lent.is_empty() {
                self.let_go_block();
            }
            if !self.batch.is_empty() {
                // Taken under the lock after a lap (below).
                return self.take(true).map(Taken::Owned);
            }
            let read = self.cursor.read.load(Relaxed);
            // The log's tail is written by every append: read again only once the messages
            // known to be there are taken, so that a worker does not pull its line away from
            // the publisher for every message.
            if read >= self.visible {
                self.visible = self.readable_to();
            }
            if read >= self.visible {
                if skipped {
                    (self.idle)();
                    skipped = false;
                }
                if !self.wait_for_more(read) {
                    return None;
                }
                continue;
            }
            let to = self.visible.min(read + LEND_RUN);
            if !self.copy_block(read, to) {
                // Unprotected, or lapped before it started (a trimmed `Seq` start): taken
                // under the ring lock, where the lap is counted.
                return self.take(true).map(Taken::Owned);
            }
            let copied = self.lent_from + self.lent.len() as u64;
            self.cursor.read.store(copied, Release);
        }
    }

    /// Makes handles on messages `from..to` in their cells into `lent`, if the subscription
    /// is protected, stopping at the first that is not in its cell (kept out of line);
    /// whether it copied any (see the module docs: lending).
    fn copy_block(&mut self, from: u64, to: u64) -> bool {
        let lend = &self.cursor.lend;
        if lend
            .compare_exchange(IDLE, COPYING, Acquire, Relaxed)
            .is_err()
        {
            return false;
        }
        self.cursor.lent_to.store(to, Relaxed);
        self.cursor.lent.store(from, Relaxed);
        self.lent_from = from;
        self.lent_next = 0;
        let slots = &self.log.slots;
        // A start the trim had passed already (a `Seq` start): lapped, which is counted under
        // the ring lock. Past the oldest kept, no trim passes the position (see the module
        // docs), so `from..to` stays kept.
        let mut seq = match from < self.log.oldest.load(Acquire) {
            true => to,
            false => from,
        };
        while seq < to {
            // SAFETY (all): protected (the exchange above, which `unprotect` waits out), so no
            // trim reaches `seq..to`: at or past the position, and below the tail read with
            // acquire. Each block is looked up once for its run of cells.
            let Some((block, first)) = (unsafe { slots.block(seq) }) else {
                break;
            };
            let end = to.min(block.base() + u64::from(block.cells()));
            let run = first..first + (end - seq) as u32;
            // The run's cells up to the first out of line, counted first: the copy below is
            // then over a range, one length store for the run, where a push per cell cost a
            // delivery about 6 instructions. Known at once up to the block's first out of
            // line (for a topic with no inline subscriber, the block's end), where a look at
            // each cell's stamp cost a delivery 6 more; past it, looked at cell by cell.
            let first_out = unsafe { block.first_out_of_line() };
            let in_line = match first_out >= run.start {
                true => first_out.min(run.end) - run.start,
                false => run
                    .clone()
                    .take_while(|&index| !unsafe { block.is_out_of_line(index) })
                    .count() as u32,
            };
            // SAFETY: the block keeps the messages while protected (no trim passes the
            // position, and a copy is not used after that: `lent_next` has passed it), and
            // `held` keeps them after an `unprotect`, which reads `lent..lent_to` (all of
            // this run) once this copy is done; the copies are never dropped.
            self.lent.extend(
                (run.start..run.start + in_line)
                    .map(|index| Message::uncounted(unsafe { block.alias(index) })),
            );
            if in_line < run.len() as u32 {
                break;
            }
            seq = end;
        }
        self.lend_to = match self.takes_every_message() {
            true => self.lent.len(),
            false => 0,
        };
        let copied = self.lent_from + self.lent.len() as u64;
        match self.lent.is_empty() {
            true => self.cursor.lent.store(NONE, Relaxed),
            false => self.cursor.lent_to.store(copied, Relaxed),
        }
        lend.store(IDLE, Release);
        !self.lent.is_empty()
    }

    /// The message in hand is finished: move the position on past it. One lent from the
    /// block in hand without the fence, since the block's end (`let_go_block`) makes up for
    /// it; any other (taken under the ring lock: an owned reader's, a group's, one after a
    /// lap) with it, since nothing comes after to make up for it.
    fn finish_in_hand(&mut self) {
        if let Some(seq) = self.in_hand.take() {
            let lent_to = self.lent_from + self.lent.len() as u64;
            match (self.lent_from..lent_to).contains(&seq) {
                true => self.advance_lent(seq + 1),
                false => self.advance(seq + 1),
            }
        }
    }

    /// The worker is done with the block of handles it copied (every one lent and finished).
    /// Sequentially consistent, as `unprotect`'s exchange and read: either this sees the
    /// subscription unprotected and lets go of what the ring kept for it, or `unprotect` sees
    /// no block and keeps nothing; and the handlers' reads happen before any free that
    /// follows an `unprotect` that saw none.
    ///
    /// Then what `advance_lent` leaves out, once a block: the position (every message of the
    /// block finished) stored again sequentially consistent before the waiting publisher's
    /// flag is read, as `advance` does for every message: a publisher that announced its
    /// wait before is seen here (see `wait_for_room`), and one that announces it after reads
    /// this position.
    fn let_go_block(&mut self) {
        let (from, to) = (self.lent_from, self.lent_from + self.lent.len() as u64);
        self.lent.clear();
        self.lent_next = 0;
        self.lend_to = 0;
        self.cursor.lent.swap(NONE, SeqCst);
        let finished = self.cursor.position.swap(to, SeqCst);
        debug_assert_eq!(
            finished, to,
            "a block is let go of once all of it is finished"
        );
        if self.log.publisher_waiting.0.load(SeqCst) {
            self.wake_publisher(from, to);
        }
        if self.cursor.lend.load(SeqCst) == UNPROTECTED {
            self.let_go_held();
        }
    }

    /// The next message, awaiting one (a task worker's or a stream's); `None` once retired and
    /// everything before the retire has been read. Holds no lock across an `.await`.
    #[cfg(feature = "tokio")]
    pub(crate) async fn next_async(&mut self) -> Option<Message<T>> {
        loop {
            if let Some(message) = self.take(false) {
                return Some(message);
            }
            if self.cursor.end.load(Acquire) != OPEN && self.is_empty() {
                return None;
            }
            let read = self.cursor.read.load(Relaxed);
            let (log, cursor) = (&self.log, &self.cursor);
            // Every append and retire tells a counted waiter, fenced: no time-out is needed.
            log.arrived_tasks
                .wait_unless(None, || {
                    log.tail.load(SeqCst) > read || cursor.end.load(SeqCst) != OPEN
                })
                .await;
        }
    }

    /// The next message already in the log, without waiting: a dropped stream's rest.
    #[cfg(feature = "tokio")]
    pub(crate) fn try_next(&mut self) -> Option<Message<T>> {
        self.take(false)
    }

    /// Whether nothing is left to read now.
    pub(crate) fn is_empty(&self) -> bool {
        self.lent_next >= self.lent.len()
            && self.batch.is_empty()
            && self.cursor.read.load(Relaxed) >= self.readable_to()
    }

    /// Where this reader's messages end now: the log's end, or where it was retired.
    fn readable_to(&self) -> u64 {
        self.log
            .tail
            .load(Acquire)
            .min(self.cursor.end.load(Acquire))
    }

    /// Moves the position on to `seq`: everything before it is finished.
    fn advance(&self, seq: u64) {
        let before = self.cursor.position.swap(seq, SeqCst);
        if self.log.publisher_waiting.0.load(SeqCst) {
            self.wake_publisher(before, seq);
        }
        #[cfg(feature = "tokio")]
        self.log.room.notify();
    }

    /// [`advance`](Self::advance) for a lending worker, from `seq - 1` (it finishes its
    /// block's messages in order): a plain store, and the waiting publisher's flag read
    /// without a fence. A sequentially consistent swap per message was a fifth of a
    /// delivery's time with a core busy (BENCHMARKS.md). Without it the flag may be seen a
    /// few messages late, or not before the block ends: `let_go_block` stores the position
    /// sequentially consistent and looks again, over the whole block, before the worker
    /// takes another or waits. So a publisher that announced its wait just as a step's store
    /// was on its way sleeps until the block's end at worst (or until it looks again, 0.2 to
    /// 5 ms on, if the block's handlers take longer), where the swap woke it at once. The
    /// same holds for the mark (`Log::wake_at`), read relaxed here. Only for messages lent
    /// from the block in hand (`finish_in_hand`, and `next_lent`'s common case).
    #[inline(always)]
    fn advance_lent(&self, seq: u64) {
        self.cursor.position.store(seq, Release);
        // The mark read here too, relaxed as the flag (`let_go_block` reads both again), so
        // that a waiting publisher costs each step a compare, not a call: the ring is full,
        // and its publisher waiting, through most of a run with cores shared.
        if self.log.publisher_waiting.0.load(Relaxed) && self.log.wake_at.load(Relaxed) == seq {
            self.wake_publisher(seq - 1, seq);
        }
        #[cfg(feature = "tokio")]
        self.log.room.notify();
    }

    /// Wakes a waiting publisher if the position's step `before..=to` reached its mark: only
    /// the step that does (see `wait_for_room`), or a lending worker's block that did.
    #[cold]
    fn wake_publisher(&self, before: u64, to: u64) {
        let wake_at = self.log.wake_at.load(SeqCst);
        if before < wake_at && to >= wake_at {
            // Lock order: row 6 (the log's ring), nothing else held; see engine/mod.rs.
            let _ring = self.log.lock_ring();
            self.log.advanced.notify_all();
            #[cfg(test)]
            self.log.wakes.fetch_add(1, SeqCst);
        }
    }

    /// Whether the subscription's filter lets `message` through. One it rejects is counted
    /// as filtered (and not received); one it panics on, as dropped. A log hands every
    /// message to every subscription, so a log subscription's filter runs here, on its
    /// worker, not on the publisher's thread.
    #[inline(always)]
    fn wants(&self, message: &Message<T>) -> bool {
        self.takes_every_message() || self.asks(message)
    }

    /// No key and no filter: every message is wanted, known in a few instructions, in line.
    #[inline(always)]
    fn takes_every_message(&self) -> bool {
        self.lane.is_none() && self.core.options.filter.is_none()
    }

    /// [`wants`](Self::wants) for a keyed group's worker or a filtered subscription.
    #[inline(never)]
    fn asks(&self, message: &Message<T>) -> bool {
        if let (Some((index, of)), Some(key)) = (self.lane, &self.core.options.key) {
            match key.lane(message.payload(), of) {
                Some(lane) if lane == index => {}
                // A key that panicked picks no worker: lane 0 counts it as dropped, as a
                // keyed group's first mailbox does.
                None if index == 0 => {
                    trace::dropped(
                        self.log.topic,
                        message.seq(),
                        &self.core.name,
                        "key panicked",
                    );
                    Counters::bump(&self.core.counters.dropped);
                    return false;
                }
                _ => {
                    // Before the position moves, so `received` never reads it as unfinished.
                    Counters::bump(&self.cursor.elsewhere);
                    return false;
                }
            }
        }
        let Some(filter) = &self.core.options.filter else {
            return true;
        };
        match filter.verdict(message.payload()) {
            Verdict::Accept => true,
            Verdict::Reject => {
                Counters::bump(&self.core.counters.filtered);
                // Before the position moves, so `received` never reads it as unfinished.
                Counters::bump(&self.cursor.filtered);
                false
            }
            Verdict::Panicked => {
                trace::dropped(
                    self.log.topic,
                    message.seq(),
                    &self.core.name,
                    "filter panicked",
                );
                Counters::bump(&self.core.counters.dropped);
                false
            }
        }
    }

    fn take(&mut self, wait: bool) -> Option<Message<T>> {
        self.finish_in_hand();
        let mut skipped = false;
        loop {
            let message = match self.take_any(false) {
                Some(message) => message,
                None if !wait => {
                    if skipped {
                        (self.idle)();
                    }
                    return None;
                }
                None => {
                    // What the filter skipped finished without the worker seeing it: a
                    // closing bus must hear of it before this worker sleeps.
                    if skipped {
                        (self.idle)();
                    }
                    self.take_any(true)?
                }
            };
            if self.wants(&message) {
                self.in_hand = Some(message.seq());
                return Some(message);
            }
            let next = message.seq() + 1;
            drop(message);
            self.advance(next);
            skipped = true;
        }
    }

    /// The next message in the log, whether the filter wants it or not.
    fn take_any(&mut self, wait: bool) -> Option<Message<T>> {
        if self.batch.is_empty() && !self.wait_until(wait, Snooze::default(), Self::fill_or_saved) {
            return None;
        }
        self.batch.pop_front()
    }

    /// Waits until the log has a message past `read` for this reader, without taking it
    /// (a lending reader's wait); false once retired and read up to the end, or stopped.
    fn wait_for_more(&mut self, read: u64) -> bool {
        // Lets a few appends land before it looks again (see `CAUGHT_UP_PAUSE`).
        if LENDERS.load(Relaxed) < crate::util::snooze::cores() {
            for _ in 0..CAUGHT_UP_PAUSE {
                std::hint::spin_loop();
            }
        } else {
            std::thread::yield_now();
        }
        if read < self.readable_to() {
            return true;
        }
        // Its snooze first, without the ring lock (it needs none to read the tail): a holder
        // of the lock makes the publishers take it too (see the module docs: the fast append).
        let mut snooze = Snooze::default();
        while self.readable_to() <= read && self.cursor.end.load(Acquire) == OPEN && snooze.snooze()
        {
        }
        self.wait_until(true, snooze, |this, _| read < this.readable_to())
    }

    /// Waits until `ready`, asked under the ring lock; false if it was not and will not be
    /// (retired and read up to the end, or stopped), or `wait` is false. Sleeps once `snooze`
    /// is over (a caller may have taken some of its turns).
    fn wait_until(
        &mut self,
        wait: bool,
        mut snooze: Snooze,
        mut ready: impl FnMut(&mut Self, &mut Ring<T>) -> bool,
    ) -> bool {
        {
            let log = Arc::clone(&self.log);
            // Lock order: row 6 (the log's ring), nothing else held; see engine/mod.rs.
            let mut ring = log.lock_ring();
            while !ready(self, &mut ring) {
                let ended = self.cursor.end.load(Acquire) != OPEN;
                if !wait || ended || stopped(&self.stop) {
                    return false;
                }
                // A worker that caught up snoozes before it sleeps, watching the tail with the
                // ring lock let go: a sleeping worker must be woken by the next append, and
                // waking many is the one part of an append that grows with the subscribers.
                // A turn is spent only while the tail has not moved; `ready` holds once it has
                // (for an open cursor), so this loop ends.
                // The lock is let go of whole, not only the mutex: publishers append without
                // it meanwhile (see the module docs: the fast append).
                if !snooze.is_over() {
                    let read = self.cursor.read.load(Relaxed);
                    drop(ring);
                    while log.tail.load(Acquire) <= read
                        && self.cursor.end.load(Acquire) == OPEN
                        && snooze.snooze()
                    {}
                    ring = log.lock_ring();
                    continue;
                }
                log.sleep(&mut ring);
            }
        }
        true
    }

    /// Takes what was saved for this reader when it left the log (see `Log::remove`), else
    /// references out of the ring; whether it took any. Under the ring lock.
    fn fill_or_saved(&mut self, ring: &mut Ring<T>) -> bool {
        let id = self.cursor.node.id;
        if let Some(at) = ring.saved.iter().position(|(of, _)| *of == id) {
            let (_, saved) = ring.saved.swap_remove(at);
            // Saved from `read` to the end: the reader has read them all now.
            self.cursor
                .read
                .store(self.cursor.end.load(Acquire), Release);
            self.batch.extend(saved);
            if !self.batch.is_empty() {
                return true;
            }
        }
        self.fill(ring)
    }

    /// Takes references out of the ring into `batch`, counting a lap as dropped; whether it
    /// took any. Under the ring lock.
    fn fill(&mut self, ring: &Ring<T>) -> bool {
        let upto = self.readable_to();
        let oldest = self.log.oldest.load(Relaxed);
        let mut read = self.cursor.read.load(Relaxed);
        let lapped_to = oldest.min(upto);
        if read < lapped_to {
            // A keyed group's readers are lapped alike (they join at one position and, as
            // `Block` ones, hold the publishers until each has passed the gap; `DropOldest`
            // is refused them): the first counts the gap as dropped, once for the group, the
            // others as another worker's (no one can tell whose each message was).
            let elsewhere = self.cursor.laps_elsewhere.load(Relaxed);
            if !elsewhere {
                for seq in read..lapped_to {
                    trace::dropped(self.log.topic, seq, &self.core.name, "trimmed from the log");
                }
            }
            // The lap stops showing in the view (`Retirer::log`) before it is counted, so a
            // stats reading sees it once or not yet (`queued` high for a moment), never twice
            // (`queued` low: a reader would think the subscription idle).
            self.cursor.read.store(lapped_to, Release);
            match elsewhere {
                false => Counters::add(&self.core.counters.dropped, lapped_to - read),
                true => Counters::add(&self.cursor.elsewhere, lapped_to - read),
            }
            read = lapped_to;
            // Nothing is in hand: the position moves on with the read.
            self.cursor.position.store(read, SeqCst);
            if self.log.publisher_waiting.0.load(SeqCst) {
                self.log.advanced.notify_all();
            }
        }
        let n = upto.saturating_sub(read).min(self.batch_size as u64);
        if n == 0 {
            self.cursor.read.store(read, Release);
            return false;
        }
        let log = &self.log;
        self.batch
            .extend((read..read + n).filter_map(|seq| log.counted(ring, seq)));
        self.cursor.read.store(read + n, Release);
        n > 0
    }
}

/// The block lending above with a retire in the middle: also run under Miri (`cargo +nightly
/// miri test -p eventbus --lib reader`), which checks that no copied handle is read after its
/// message is freed.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::deadlock::TopicWaits;
    use crate::delivery::core::Consumer;
    use crate::options::Options;

    fn append(log: &Log<String>, pool: &mut Pool<Envelope<String>>, seq: u64, stop: &Receiver<()>) {
        let waits = TopicWaits::default();
        let wait = RoomWait {
            by: Some(None),
            stop,
            waits: &waits,
            publisher: None,
        };
        assert!(log
            .append(pool, seq, format!("m{seq}"), wait, false, None)
            .is_ok());
    }

    fn lent_text(reader: &mut Reader<String>) -> Option<(bool, String)> {
        reader.next_lent().map(|taken| match taken {
            Taken::Lent(message) => (true, message.payload().clone()),
            Taken::Owned(message) => (false, message.payload().clone()),
        })
    }

    /// A log, a reader of it, and its stop channel (the sender, to keep it open).
    type LogAndReader = (
        Arc<Log<String>>,
        Reader<String>,
        crossbeam_channel::Sender<()>,
        Receiver<()>,
    );

    /// A log keeping `retain` messages and a `Block` reader of it (capacity 4; a task's,
    /// which does not lend, with `by_task`) joined at its start.
    fn block_reader(retain: usize, by_task: bool) -> LogAndReader {
        let (log, reader, keep, stop) = unjoined_block_reader(retain, by_task);
        reader.join(Start::Now);
        (log, reader, keep, stop)
    }

    /// [`block_reader`], not joined yet.
    fn unjoined_block_reader(retain: usize, by_task: bool) -> LogAndReader {
        unjoined_reader(retain, Overflow::Block, by_task)
    }

    /// A log keeping `retain` messages and a reader of it (capacity 4), not joined yet.
    fn unjoined_reader(retain: usize, overflow: Overflow, by_task: bool) -> LogAndReader {
        let log = Arc::new(Log::new(
            "t",
            Retention {
                messages: retain,
                max_age: None,
            },
        ));
        let (keep, stop) = crossbeam_channel::bounded::<()>(0);
        let closing = Closing {
            stop: stop.clone(),
            poke: Box::new(|| {}),
        };
        let reader = reader(&log, 1, 4, overflow, by_task, closing, |retirer| {
            SubscriptionCore::new(
                1,
                Arc::from("s"),
                "t",
                Options::default(),
                Consumer::Worker,
                retirer,
            )
        });
        (log, reader, keep, stop)
    }

    /// A log, a reader of it, the pool its appends take blocks from, and its stop channel.
    type LogReaderAndPool = (
        Arc<Log<String>>,
        Reader<String>,
        Pool<Envelope<String>>,
        crossbeam_channel::Sender<()>,
        Receiver<()>,
    );

    /// [`block_reader`], lending, once it has copied a block of three (m0, m1, m2) and lent
    /// m0; with the pool.
    fn lending_a_block_of_three(retain: usize) -> LogReaderAndPool {
        let (log, mut reader, keep, stop) = block_reader(retain, false);
        let mut pool = Pool::new();
        for seq in 0..3 {
            append(&log, &mut pool, seq, &stop);
        }
        assert_eq!(lent_text(&mut reader), Some((true, "m0".into())));
        assert_eq!(reader.lent.len(), 3, "one block of the three there");
        (log, reader, pool, keep, stop)
    }

    /// Appends without the ring lock beside a `DropOldest` reader, which takes counted
    /// references under it while the appends trim (and drop) the values it is lapped on, and
    /// sleeps when it has caught up.
    /// Also run under Miri (`cargo +nightly miri test -p eventbus --lib fast_append`), whose
    /// checks find a value read after a trim dropped it, or a cell read as it is written:
    /// what a fast append overlapping a holder of the lock would do.
    ///
    /// Which appends run without the lock is up to the scheduler: on a loaded machine a
    /// round can pass with the reader off its core throughout, every append fast. Rounds go
    /// on (each a fresh log) until one has run both kinds, at most `ROUNDS` of them.
    #[test]
    fn a_holder_of_the_ring_lock_never_overlaps_a_fast_append() {
        const ROUNDS: usize = 20;
        let messages: u64 = if cfg!(miri) { 300 } else { 50_000 };
        let mut fast = Vec::new();
        for _ in 0..ROUNDS {
            let round = fast_appends_beside_a_reader(messages);
            if round > 0 && round < messages {
                return;
            }
            fast.push(round);
        }
        panic!("of {messages} appends, {fast:?} ran without the lock in each round: the test needs both kinds in one");
    }

    /// One round of the test above: how many of `messages` appends ran without the lock.
    fn fast_appends_beside_a_reader(messages: u64) -> u64 {
        let (log, mut reader, _keep, stop) = unjoined_reader(4, Overflow::DropOldest, false);
        reader.join(Start::Now);
        let appended = std::thread::scope(|scope| {
            let (log, stop) = (&log, &stop);
            let publisher = scope.spawn(move || {
                let mut pool = Pool::new();
                for seq in 0..messages {
                    append(log, &mut pool, seq, stop);
                }
            });
            // Caught up, it sleeps until an append wakes it: then the appends that follow
            // may run without the lock until it counts itself again.
            let mut last = None;
            while last != Some(messages - 1) {
                let Some(message) = reader.take(true) else {
                    panic!("the log is open: a message comes");
                };
                let seq = message.seq();
                assert_eq!(message.payload(), &format!("m{seq}"), "read intact");
                assert!(last < Some(seq), "{seq} after {last:?}: in order");
                last = Some(seq);
            }
            publisher.join().is_ok()
        });
        assert!(appended);
        log.fast_appends.load(SeqCst)
    }

    /// A lending worker and a publisher that waits for it, in turns: the worker catches up
    /// and sleeps, the append that wakes it stops counting it among the lockers, and the
    /// appends that follow run without the lock until it counts itself again. Every message
    /// arrives, in order, each read in its cell. Also under Miri (as above).
    #[test]
    fn a_woken_worker_counts_itself_again_before_it_reads_the_ring() {
        let messages: u64 = if cfg!(miri) { 200 } else { 10_000 };
        let (log, mut reader, _keep, stop) = block_reader(8, false);
        std::thread::scope(|scope| {
            let (log, stop) = (&log, &stop);
            scope.spawn(move || {
                let waits = TopicWaits::default();
                let mut pool = Pool::new();
                for seq in 0..messages {
                    let wait = RoomWait {
                        by: None,
                        stop,
                        waits: &waits,
                        publisher: None,
                    };
                    let appended = log.append(&mut pool, seq, format!("m{seq}"), wait, false, None);
                    assert!(appended.is_ok(), "appended {seq}");
                    if seq % 100 == 0 {
                        // Until the worker has caught up and sleeps: the next append wakes it.
                        while log.lock_ring().sleepers == 0 {
                            std::thread::yield_now();
                        }
                    }
                }
            });
            for seq in 0..messages {
                assert_eq!(lent_text(&mut reader), Some((true, format!("m{seq}"))));
            }
        });
        assert!(
            log.fast_appends.load(SeqCst) > 0,
            "some appends ran without the lock"
        );
        assert!(
            log.recounts.load(SeqCst) > 0,
            "woken, it counted itself again"
        );
    }

    #[test]
    fn a_block_lent_before_its_subscription_leaves_outlives_the_laps_that_follow() {
        let (log, mut reader, mut pool, _keep, stop) = lending_a_block_of_three(4);
        // Leaves while holding the block: the ring keeps those three, and the publisher
        // no longer waits for it, so the next appends trim them (and let go of the ring's
        // own references) while the worker still lends from the block.
        log.remove(1);
        for seq in 3..12 {
            append(&log, &mut pool, seq, &stop);
        }
        assert_eq!(lent_text(&mut reader), Some((true, "m1".into())));
        assert_eq!(lent_text(&mut reader), Some((true, "m2".into())));
        assert_eq!(
            lent_text(&mut reader),
            None,
            "removed when the log's end was 3: nothing after"
        );
        assert!(log.ring.lock().held.is_empty(), "let go of with the block");
    }

    /// Both sides of the wait handshake at once, a litmus test (run under Miri, whose weak
    /// memory makes the reorderings a store buffer does: `cargo +nightly miri test -p
    /// eventbus --lib reader`): an owned reader (a task's) finishing the message that
    /// reaches a waiting publisher's mark, and the publisher announcing its wait and
    /// reading the position. One of the two must see the other, else the publisher sleeps
    /// until it looks again (`FIRST_RECHECK` to `RECHECK`) with room made.
    #[test]
    fn an_owned_reader_and_a_waiting_publisher_see_one_another() {
        for round in 0..if cfg!(miri) { 16 } else { 200 } {
            let by_task = true;
            let (log, mut reader, _keep, stop) = block_reader(8, by_task);
            let mut pool = Pool::new();
            for seq in 0..2 {
                append(&log, &mut pool, seq, &stop);
            }
            assert_eq!(reader.take(false).map(|m| m.seq()), Some(0));
            log.wake_at.store(1, SeqCst);
            let cursor = Arc::clone(&reader.cursor);
            let saw_room = std::thread::scope(|scope| {
                // Finishes message 0: the position steps from 0 to the mark, 1.
                scope.spawn(|| reader.take(false).map(|m| m.seq()));
                log.publisher_waiting.0.store(true, SeqCst);
                cursor.position.load(SeqCst) >= 1
            });
            assert!(
                saw_room || log.wakes.load(SeqCst) == 1,
                "round {round}: the publisher read no room and the reader did not wake it"
            );
        }
    }

    #[test]
    fn a_lending_worker_wakes_a_publisher_whose_mark_its_block_passed_unseen() {
        let (log, mut reader, mut pool, _keep, stop) = lending_a_block_of_three(8);
        assert_eq!(lent_text(&mut reader), Some((true, "m1".into())));
        assert_eq!(lent_text(&mut reader), Some((true, "m2".into())));
        append(&log, &mut pool, 3, &stop);
        // The position passed 2 before the worker saw the flag (a load without a fence may
        // see it that late): only the block's end can wake this publisher.
        assert_eq!(reader.cursor.position.load(SeqCst), 2);
        log.wake_at.store(2, SeqCst);
        log.publisher_waiting.0.store(true, SeqCst);
        let mut ring = log.ring.lock();
        std::thread::scope(|scope| {
            let log = &log;
            let worker = scope.spawn(move || {
                // Waits until the publisher below sleeps (its wait lets go of the ring lock).
                drop(log.ring.lock());
                lent_text(&mut reader)
            });
            let slept = log
                .advanced
                .wait_for(&mut ring, Duration::from_secs(20))
                .timed_out();
            drop(ring);
            assert!(!slept, "not woken by the worker's block end");
            assert_eq!(worker.join().ok().flatten(), Some((true, "m3".into())));
        });
        log.publisher_waiting.0.store(false, SeqCst);
    }

    /// `Start::Since` starts early by the log's clock's slack and a stamp's rounding
    /// (`clock.rs`, `Log::join_all`): a message appended within the age of the join is not
    /// left out.
    /// Appends 50 µs apart for twice the age, each timed before it, then a join timed after
    /// it: a message whose `before` is within the age of `joined` was appended within the age
    /// of the join's clock reading. The age is no multiple of a 4 ms tick (see the trim's
    /// test in `tests/it/log_topics.rs`).
    #[test]
    #[cfg_attr(miri, ignore = "times real appends for 44 ms")]
    fn since_leaves_out_no_message_appended_within_its_age() {
        const AGE: Duration = Duration::from_millis(22);
        let mut checked = 0;
        for round in 0..50 {
            let (log, reader, _keep, stop) = unjoined_block_reader(1 << 16, false);
            let mut pool = Pool::new();
            let mut appended: Vec<Instant> = Vec::new();
            let started = Instant::now();
            while started.elapsed() < 2 * AGE {
                if appended
                    .last()
                    .is_some_and(|last| last.elapsed() < AGE / 440)
                {
                    continue;
                }
                appended.push(Instant::now());
                append(&log, &mut pool, appended.len() as u64 - 1, &stop);
            }
            reader.join(Start::Since(AGE));
            let joined = Instant::now();
            let start = reader.cursor.start.load(Acquire);
            // None within the age: this thread was kept off its core for longer, and the
            // round proves nothing.
            let Some(within) = appended.iter().position(|before| joined - *before <= AGE) else {
                continue;
            };
            assert!(
                start <= within as u64,
                "round {round}: started at {start}, after {within}, appended within {AGE:?}"
            );
            checked += 1;
            if checked == 10 {
                return;
            }
        }
        panic!("in 50 rounds, only {checked} joined within {AGE:?} of an append");
    }
}

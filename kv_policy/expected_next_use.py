"""ExpectedNextUse: evict the block with the lowest expected reuse rate (largest expected time to next use),
from what a continuous-batching engine knows when it decides; and DeadlineAware, the same estimate weighed
by deadline tightness and priority.

Per block, the expected number of reads per decode step:
* 1 for a sink/window block of a request in the announced next batch (classes prefetch-soon and
  decode-critical; the engine announces the batch one step ahead);
* p for a sink/window block of an active request outside that batch, where p = batch / active requests is
  the decode probability (an EMA of what the scheduler did: requests decoded per step / active requests);
* (h + A) / (t + A / R0) for any other block (a heavy-hitter candidate): h reads observed while it was
  outside the sink/window, t steps since it left them (or was allocated), a Gamma prior of A = 0.5 reads
  at rate R0 = 0.02 per step, so an unobserved block starts near R0 and its own reuse takes over;
* 0 for cold-spillable and done blocks;
* for a block a prefill allocated and has not read yet (its own step only): 1, first among all, so an admission
  never spills or drops the blocks it allocates before it reads them (`fresh_first`; the key lapses with the step
  through `Policy.stale`). Shared documents always; a request's own prompt blocks while the admission's unread
  blocks are under `fresh_share` (10%) of the live blocks: long_context_extreme's prompts are thousands of blocks,
  and protecting all of them evicts every other request's blocks (cut 0.172 -> 0.117 on seeds 50-57);
* at least QUEUE_RATE (`queue_rate`, 0.05) for a shared document block the engine has announced a waiting request
  will read at admission (a prefetch-soon hint that is not a batch change), until the request is admitted.
Under an independent-reference model the optimal online eviction keeps the highest-rate blocks (A0); the
rates here are stationary per block (a request's heavy hitters do not drift), so a key fixed at the block's
last access or hint stays valid, which is what keeps each event O(log live blocks).

Priority knob (`priority_weight`, kappa, default 0): a high-priority (>= 70) heavy-hitter candidate's
keep-value is rate x exp(kappa), i.e. a miss of it counts exp(kappa) misses (a Lagrange weight on the
high-priority misses); kappa = 0 is pure reuse. The look-ahead ranks candidates with the same weight.
The goals (goals.py) judge the shipped parameters (`ExpectedNextUse`, kappa 0, young 0.05): no per-profile knob.

Batch raise (`batch_raise`, default on): a heavy-hitter candidate of a request announced for the step under way
that has not decoded in it yet is worth rate / p (its request decodes in this step for sure), until the decode or the
step's end. Applied lazily: the simulator asks `raise_key` for each next victim and files a raised one again, so the
cost is per victim, not per candidate (an eager re-key of every candidate of the batch ran at 44k events/s); the
raised keys lapse through `stale`. It is the previous round's "log(1/p) bonus for the announced batch" with the
lapse it lacked (that bonus stood until the block's next read). At most `raise_cap` (RAISE_CAP) blocks are raised
per step, so a step costs O(raise_cap log n) more at most: on long_context_extreme, whose batch requests hold
thousands of candidates, uncapped raises reached 6,719 in one step and 11-16 us per event at 15,176 live blocks
(5.3 us with the cap of 512);
the other profiles raised at most 325 per step (plain policy, seeds 800-839), below the cap, so their decisions do not change.

Prefetch: a spilled block announced prefetch-soon is read in the background if the step's I/O budget holds it
and a block with a lower keep-value can make room. Look-ahead (`lookahead`, default on): at the end of each
step the spilled heavy-hitter candidates of the requests announced for the next batch (entering ones, and
those decoded this step that were not announced out) are nominated, best keep-value first, at most 12 per
request, then the spilled blocks of documents a waiting request will read (so an admission's prefill finds them
resident; fetched while the budget lasts and a lower-valued victim exists); for that one step a candidate's rate is rate / p (its request decodes next step for sure), which is
what the victim must be worth less than. The raise ends at its read or after the step (the simulator re-keys
an unread look-ahead block), so it never outlives the announcement. Spilled candidates are kept per request
in a max-heap filled as they are evicted: O(log n) per eviction, O(batch x 12 log n) per step.
Recompute: a recompute-ok victim is dropped instead of spilled when recomputing it costs less than writing
it and reading it back, unless it has been read as a heavy hitter (`spill_reused`, default on): such a
block is spilled once so that its clean slow-tier copy can be fetched by the look-ahead and evicted again
without a write (simulator.py, clean copies).

Exposure-aware prior (`young`, weight w in [0, 1); default YOUNG = 0.05, chosen on the first half of the Mooncake
conversation trace; 0 gives the previous rounds' key). Without it a candidate's prior
counts as H = 1 / (1 - exp(-decay)) steps of exposure from its birth, so a block read once a few steps after birth is
ranked as if watched for H steps. With it, a Gamma-Poisson posterior: prior mean m (as above), prior pseudo-count
w m H reads over w H steps, the block's decayed reads over its decayed exposure H (1 - exp(-decay age)): rate =
(w m H e + reads) / (w H e + H (1 - e)), e = exp(-decay age). Its key is the static log-score (decayed reads plus
the prior's w m H) plus the exposure term `young_correction`, which shrinks as the block ages; the term is refreshed
through `stale` whenever the exposure has grown by YOUNG_RATIO (`checkpoint_age`, a few times per block), so a quiet
young block sinks as its posterior does. Compiled as the rest (enu_compiled.py: base, birth, version rows and the
checkpoint calendar).

Reads: the events so far only (no trace length, no later event); tests/policy/test_policy_prefix.py checks it.
"""
from __future__ import annotations

import heapq
import math
from typing import Iterator

from harness.errors import UserError
from kv_policy import codes
from kv_policy.policies import Policy
from kv_policy.trace import Trace

DECAY = 0.005           # per-step decay of observed reads (half-life 139 steps)
PRIOR_SCALE = 1.0       # weight of the request-length prior against a block's own reads
FREE_TARGET = 0.003     # background-spill (or drop) toward 0.3% free fast tier within the I/O budget (1% cost
                        # ~1.3 points of LRU-to-MIN gap on held-aside seeds 50-54; 0.3% keeps most sync writes off)
HH_START = 4.0          # heavy-hitter reads per decode before any is observed
NOMINAL_BLOCKS = 32     # context length (blocks) assumed before a request's prefill read tells it
LOG_NEVER = -50.0       # cold-spillable and done blocks
HIGH_PRIORITY = 70      # the band the priority knob protects (the simulator's high band)
LAYOUT_FIRST = 200.0    # sink/window blocks outrank every heavy-hitter candidate, whatever its priority weight
P_EMA = 0.05            # smoothing of the decode probability estimate
P_START = 0.5
TIGHT_REF_US = 100_000.0  # DeadlineAware: a 100 ms TPOT scores tightness 0.5
QUEUE_RATE = 0.05       # reads per step assumed for a shared block a waiting request will read
RAISE_CAP = 512         # batch raises per step at most (a bound on the per-step cost; above what short contexts use)
YOUNG = 0.05            # `young`'s weight as shipped (chosen on the first half of the Mooncake conversation trace)
YOUNG_RATIO = 1.25      # `young`: a block's key is refreshed when its exposure term has grown by this factor
_ACCESS, _HINT, _ALLOC = codes.ACCESS, codes.HINT, codes.ALLOC  # bound once: read on every event
_DECODE_CRITICAL, _PREFETCH_SOON, _WARM = codes.DECODE_CRITICAL, codes.PREFETCH_SOON, codes.WARM
_COLD_SPILLABLE, _RECOMPUTE_OK = codes.COLD_SPILLABLE, codes.RECOMPUTE_OK
LOOKAHEAD_PER_REQUEST = 12  # look-ahead candidates taken per next-batch request (4 cost misses, 30 = 12: seeds 50-53)


class ExpectedNextUse(Policy):
    """Keep the blocks most likely to be read soon: next batch, then decode probability x observed reuse."""

    name = "ExpectedNextUse"
    uses_hints = True
    prefetch_on_hint = True
    observes_events = True
    step_keys = True

    def __init__(self, priority_weight: float = 0.0, decay: float = DECAY, prior: float = PRIOR_SCALE,
                 free_target: float = FREE_TARGET, lookahead: float = 1.0, spill_reused: float = 1.0,
                 queue_rate: float = QUEUE_RATE, fresh_first: float = 1.0,
                 batch_raise: float = 1.0,
                 fresh_share: float = 0.1, raise_cap: float = RAISE_CAP, young: float = YOUNG) -> None:
        self.raise_cap = int(raise_cap)
        self.queue_log = math.log(queue_rate) if queue_rate > 0 else None
        self.fresh_first = bool(fresh_first)
        self.fresh_share = float(fresh_share)
        self.raises_keys = bool(batch_raise)
        self.free_target = float(free_target)
        self.prefetch_lookahead = bool(lookahead)
        self.spill_reused = bool(spill_reused)
        self.kappa = float(priority_weight)
        self.lam = float(decay)
        self.horizon = 1.0 / (1.0 - math.exp(-self.lam))   # decayed reads of a block read once per step
        self.prior_scale = float(prior)
        self.young = float(young)   # > 0: exposure-aware prior of that weight (see young_correction); 0: the old key
        if not 0.0 <= self.young < 1.0:
            raise UserError(f"ExpectedNextUse: young={young} must be in [0, 1)")
        if self.young:
            self.prior_scale = self.young

    def weights(self, trace: Trace) -> list[float]:
        """Per-block log-multiplier of the expected rate (priority knob)."""
        return [self.kappa if p >= HIGH_PRIORITY else 0.0 for p in trace.block_priority.tolist()]

    def bind(self, trace: Trace) -> None:
        nb = trace.n_blocks
        self.req = trace.block_request.tolist()
        self.logw = self.weights(trace)
        self.score = [0.0] * nb            # log of the decayed read count, in units where step s weighs exp(lam*s)
        self.layout = bytearray(nb)        # 1 = in its request's sink/window read set
        self.live: dict[int, int] = {}     # request -> live blocks
        self.decoded: set[int] = set()
        self.cur_step = None
        self.p = P_START
        self.log_h = math.log(1.0 * self.horizon)
        self.log_ph = math.log(self.p * self.horizon)
        self.hh_per_decode = HH_START
        self.hh_reads = 0
        self.live_blocks = 0
        self.mean_blocks = 1.0
        self.fresh = bytearray(nb)
        self.unread = bytearray(nb)        # a document block allocated by a prefill that has not read it yet
        self.unread_now: list[int] = []
        self.batch_now: set[int] = set()   # requests announced for the step under way
        self.done_now: set[int] = set()    # ... that have decoded in it
        self.raised: list[int] = []
        self.raised_step = -1
        self.ctx: dict[int, int] = {}      # request -> blocks its prefill read (context incl. shared documents)
        self.admitting = -1
        self.spilled: dict[int, list[tuple[float, int]]] = {}  # request -> max-heap (-score, block) of evicted
        self.entering: set[int] = set()    # requests announced for the next batch this step
        self.leaving: set[int] = set()     # requests announced out of it
        self.boost: dict[int, int] = {}    # look-ahead prefetched block -> step it was fetched for
        self.held: list[tuple[tuple[float, int], int]] = []  # candidates the last look-ahead took off their heap
        self.evictions = 0                 # candidates evicted so far; evicted_at: the count at a block's eviction
        self.evicted_at = [0] * nb
        self.mark = 0
        self.hh_seen = bytearray(nb)       # read at least once as a heavy hitter
        self.queued = bytearray(nb)        # a shared block a waiting request will read (engine's queue hint)
        self.queued_docs: dict[int, list[int]] = {}  # document (block_request) -> its queue-hinted blocks
        if self.young:
            self.base = [0.0] * nb         # the static log-score (decayed reads + prior) the age term is added to
            self.born = [0] * nb           # step its prior was set (its exposure starts there)
            self.ver = [0] * nb            # the block's latest checkpoint entry
            self.due: dict[int, list[tuple[int, int]]] = {}  # step -> (block, version) whose key is refreshed then
            self.due_last = -1                 # the last step whose checkpoints were taken

    def _prior(self, b: int, step: int) -> float:
        """Log-score of a block with no reads of its own yet: the decode probability x the heavy-hitter reads per
        decode shared over its request's blocks (the engine knows each request's context length)."""
        r = self.req[b]
        if r < 0:
            n = self.mean_blocks              # a shared document: an average request's share
        elif r in self.ctx:
            n = max(self.live[r], self.ctx[r]) if r in self.live else self.ctx[r]
        else:  # context not known yet: at least what is allocated so far, and no less than a nominal length
            n = max(self.live.get(r, 0), NOMINAL_BLOCKS)  # (so the first blocks of a request are not ranked by order)
        rate = self.p * self.hh_per_decode / max(1, n)
        return self.lam * step + math.log(rate * self.horizon * self.prior_scale)

    def _new_step(self, step: int) -> None:
        """The decode probability and heavy-hitter reads per decode, updated from the step that ended."""
        if self.decoded and self.live:
            self.p += P_EMA * (min(1.0, len(self.decoded) / len(self.live)) - self.p)
            self.hh_per_decode += P_EMA * (self.hh_reads / len(self.decoded) - self.hh_per_decode)
            self.mean_blocks = self.live_blocks / len(self.live)
        self.decoded.clear()
        self.entering.clear()
        self.leaving.clear()
        self.hh_reads = 0
        self.cur_step = step
        self.log_ph = math.log(self.p * self.horizon)

    def on_event(self, i: int, kind: int, b: int, step: int, critical: bool, cls: int,
                 _log1p=math.log1p, _exp=math.exp) -> None:  # (bound as locals: this runs on every event)
        if step != self.cur_step:
            self._new_step(step)
        if self.unread_now:  # (a block is flagged unread only while it is listed there)
            self.unread[b] = 0
        if critical and kind == _ACCESS:  # the busiest case first: a decode's read
            r = self.req[b]
            self.decoded.add(r)
            self.done_now.add(r)
            if self.boost:
                self.boost.pop(b, None)
            if not self.layout[b]:
                self.hh_reads += 1
                self.hh_seen[b] = 1
                score = self.score
                s, x = (self.base[b] if self.young else score[b]), self.lam * step
                score[b] = (s + _log1p(_exp(x - s))) if s > x else (x + _log1p(_exp(s - x)))
                if self.young:
                    self._aged(b, step, False)
            return
        r = self.req[b]
        if kind == _ACCESS:
            if not self.layout[b]:  # a prefill read: the admitted request's context length is known now
                self.ctx[self.admitting] = self.ctx.get(self.admitting, 0) + 1
                if self.fresh[b]:
                    self.fresh[b] = 0
                    self.score[b] = self._prior(b, step)
                    if self.young:
                        self._aged(b, step, True)
                else:  # a shared (document) block joins one more request's context
                    s, x = (self.base[b] if self.young else self.score[b]), self._prior(b, step)
                    self.score[b] = (s + math.log1p(math.exp(x - s))) if s > x else (x + math.log1p(math.exp(s - x)))
                    if self.young:
                        self._aged(b, step, False)
        elif kind == _HINT:
            if critical:
                self.layout[b] = 1
                if cls == _PREFETCH_SOON:
                    self.entering.add(r)
                elif cls == _WARM:
                    self.leaving.add(r)
            elif cls == _PREFETCH_SOON:  # not a batch change: a waiting request reads it when admitted
                if self.queue_log is not None and not self.queued[b]:
                    self.queued[b] = 1
                    self.queued_docs.setdefault(r, []).append(b)
            elif self.layout[b]:            # slid out of the window: a heavy-hitter candidate from now on
                self.layout[b] = 0
                self.score[b] = self._prior(b, step)
                if self.young:
                    self._aged(b, step, True)
                if self.queued[b]:
                    self._unqueue(b, r)
            elif self.queued[b]:
                self._unqueue(b, r)
        elif kind == _ALLOC:
            if r >= 0:
                self.live[r] = self.live.get(r, 0) + 1
                if r not in self.ctx:
                    self.admitting = r
            self.live_blocks += 1
            self.layout[b] = 1 if cls == _DECODE_CRITICAL else 0
            self.fresh[b] = 1
            if self.fresh_first and cls != _DECODE_CRITICAL and \
                    (r < 0 or len(self.unread_now) < self.fresh_share * self.live_blocks):
                self.unread[b] = 1  # allocated for a prefill, which reads it this step
                self.unread_now.append(b)
            self.score[b] = self._prior(b, step)
            if self.young:
                self._aged(b, step, True)
        else:  # FREE
            self.live_blocks -= 1
            self.boost.pop(b, None)
            if r >= 0 and r in self.live:
                left = self.live[r] - 1
                if left:
                    self.live[r] = left
                else:
                    del self.live[r]
                    self.ctx.pop(r, None)
                    self.spilled.pop(r, None)

    def _aged(self, b: int, step: int, born: bool) -> None:
        """`young`: score[b] holds the static log-score just set (a prior when `born`): keep it as the base and add
        the exposure term of the block's age; file the step at which that term will have moved by YOUNG_RATIO."""
        self.base[b] = self.score[b]
        if born:
            self.born[b] = step
        self._refresh(b, step)

    def _refresh(self, b: int, step: int) -> None:
        age = step - self.born[b]
        self.score[b] = self.base[b] + young_correction(self.young, self.lam, age)
        self.ver[b] += 1
        nxt = checkpoint_age(self.young, self.lam, age, YOUNG_RATIO)
        if nxt is not None:
            self.due.setdefault(self.born[b] + nxt, []).append((b, self.ver[b]))

    def _due(self) -> list[int]:
        """`young`: the candidates whose checkpoint falls in the step about to start, their keys refreshed."""
        now = self.cur_step + 1
        steps = range(self.due_last + 1, now + 1) if now - self.due_last <= 64 else sorted(t for t in self.due
                                                                                              if t <= now)
        self.due_last = now
        out = []
        for t in steps:  # (ascending; a refreshed key is filed at least one step later)
            for b, v in self.due.pop(t, ()):
                if self.ver[b] == v and not self.layout[b]:
                    self._refresh(b, now)
                    out.append(b)
        return out

    def stale(self) -> list[int]:
        """Document blocks allocated for a prefill that did not read them within the step: the read-now key lapses.
        With `young`, also the candidates whose exposure term moved (refreshed keys)."""
        out = [b for b in self.unread_now if self.unread[b]]
        for b in out:
            self.unread[b] = 0
        self.unread_now = []
        if self.raises_keys and self.cur_step is not None:
            for b in self.raised:
                if self.boost.get(b) == self.raised_step:
                    del self.boost[b]
                    out.append(b)
            self.raised = []
            self.raised_step = self.cur_step
            self.batch_now = self.entering | (self.decoded - self.leaving)
            self.done_now = set()
        if self.young and self.cur_step is not None:
            out.extend(self._due())
        return out

    def raise_key(self, b: int) -> bool:
        """A heavy-hitter candidate of a request announced for the step under way that has not decoded yet: its rate
        is rate / p until its request decodes or the step ends (what the eager raise of every such block would give,
        at the cost of the victims only)."""
        r = self.req[b]
        if self.layout[b] or r not in self.batch_now or r in self.done_now or \
                self.boost.get(b, -2) >= self.raised_step or len(self.raised) >= self.raise_cap:
            return False
        self.boost[b] = self.raised_step
        self.raised.append(b)
        return True

    def _unqueue(self, b: int, r: int) -> None:
        self.queued[b] = 0
        lst = self.queued_docs.get(r)
        if lst is not None:
            lst.remove(b)
            if not lst:
                del self.queued_docs[r]

    def key(self, b: int, seq: int, step: int, cls: int, _cold=_COLD_SPILLABLE, _rok=_RECOMPUTE_OK,
            _soon=_PREFETCH_SOON, _first=LAYOUT_FIRST) -> float:
        """log(expected reads per step) + lam x step (a common offset: keys stay comparable as time passes)."""
        if cls >= _cold and cls != _rok:
            return self.lam * step + LOG_NEVER + self.logw[b]
        if self.layout[b]:  # (the logs are cached: log(rate x horizon), the same floats)
            return self.lam * step + (self.log_h if cls <= _soon else self.log_ph) + _first
        if self.unread[b]:  # allocated for a prefill that has not read it yet: read now
            return self.lam * step + self.log_h + _first
        if self.boost and self.boost.get(b, -2) >= step - 1:  # its request decodes next step: rate / p
            return self.score[b] + self.logw[b] - math.log(self.p)
        if self.queued[b]:  # read when its waiting request is admitted: at least the queue rate
            q = self.lam * step + self.queue_log + math.log(self.horizon)
            s = self.score[b] + self.logw[b]
            return q if q > s else s
        return self.score[b] + self.logw[b]

    def choose_recompute(self, b: int, read_us: float, write_us: float, recompute_us: float) -> bool:
        if self.spill_reused and self.hh_seen[b]:  # re-read before: keep a copy the look-ahead can fetch
            return False
        return recompute_us < write_us + read_us

    def on_evicted(self, b: int) -> None:
        if self.layout[b]:
            return
        self.evictions += 1
        self.evicted_at[b] = self.evictions
        r = self.req[b]
        heapq.heappush(self.spilled.setdefault(r, []), (-self.score[b] - self.logw[b], b))

    def lookahead(self, step: int, loc: bytearray) -> Iterator[int]:
        """The best-scored spilled heavy-hitter candidates of the requests announced for the next step (at most
        LOOKAHEAD_PER_REQUEST each), best first, then the spilled blocks of documents a waiting request will read.
        Lazy: the simulator takes them while the I/O budget and worse victims last (a handful a step against
        hundreds nominated on a serving trace, where sorting them all took 40% of the run), so only what it takes is
        popped; the entries popped are filed again at the next call. A block evicted during the pass is not
        nominated in it (the nominations are those of the step's end)."""
        for e, r in self.held:
            h = self.spilled.get(r)
            if h is not None:
                heapq.heappush(h, e)
        self.held = []
        self.mark = self.evictions
        return self._nominate(step, loc, self.entering | (self.decoded - self.leaving))

    def _top(self, r: int, loc: bytearray) -> tuple[float, int] | None:
        """Request r's best spilled candidate nominated at the step's end, taken off its heap (held), or None."""
        h = self.spilled.get(r)
        while h:
            e = heapq.heappop(h)
            b = e[1]
            if loc[b] != codes.LOC_SLOW or -e[0] != self.score[b] + self.logw[b]:
                if loc[b] == codes.LOC_SLOW:  # re-scored while spilled (a hint): file it again
                    heapq.heappush(h, (-self.score[b] - self.logw[b], b))
                continue
            self.held.append((e, r))
            if self.evicted_at[b] <= self.mark:
                return e
        return None

    def _nominate(self, step: int, loc: bytearray, nxt: set[int]) -> Iterator[int]:
        top = []
        for r in nxt:
            e = self._top(r, loc)
            if e is not None:
                top.append((e[0], e[1], r))
        heapq.heapify(top)  # (-score, block) orders exactly as sorting every request's candidates did
        taken: dict[int, int] = {}
        while top:
            _, b, r = heapq.heappop(top)
            self.boost[b] = step
            yield b
            n = taken[r] = taken.get(r, 0) + 1
            if n < LOOKAHEAD_PER_REQUEST:
                e = self._top(r, loc)
                if e is not None:
                    heapq.heappush(top, (e[0], e[1], r))
        if self.queued_docs:  # shared blocks a waiting request reads at admission (kept by their own key)
            for lst in list(self.queued_docs.values()):  # after the next batch's candidates (README)
                for b in list(lst):
                    if loc[b] == codes.LOC_SLOW:
                        yield b


def young_correction(weight: float, lam: float, age: int) -> float:
    """The exposure term of `young`'s key: a block's prior counts as `weight` x horizon steps of exposure, so its
    Gamma-Poisson posterior rate is (decayed reads + weight x m x H) / (decayed exposure + weight x H), where the
    exposure of a block `age` steps old is H (1 - exp(-lam age)); in the key's log units (whose numerator is the
    static log-score) that is -log(1 - (1 - weight) exp(-lam age)): log(1 / weight) at birth (the plain prior
    mean), 0 once the block is old (the decayed count over the full horizon, as without `young`)."""
    return -math.log(1.0 - (1.0 - weight) * math.exp(-lam * age))


def checkpoint_age(weight: float, lam: float, age: int, ratio: float) -> int | None:
    """The age at which the exposure H (1 - (1 - weight) exp(-lam a)) reaches `ratio` x its value at `age`
    (at least age + 1), or None once that is beyond the horizon H (the term has nearly settled)."""
    den = 1.0 - (1.0 - weight) * math.exp(-lam * age)
    target = ratio * den
    if target >= 1.0:
        return None
    a = math.ceil(-math.log((1.0 - target) / (1.0 - weight)) / lam)
    return max(a, age + 1)


class DeadlineAware(ExpectedNextUse):
    """ExpectedNextUse whose keep-value is weighed by deadline tightness and priority, never overriding reuse:
    weight = (1 + tightness) x (1 + priority / 100), tightness = 100 ms / (100 ms + TPOT), so the weight spans
    at most 1..4 while reuse rates span orders of magnitude."""

    name = "DeadlineAware"

    def weights(self, trace: Trace) -> list[float]:
        out = []
        for p, d in zip(trace.block_priority.tolist(), trace.block_deadline_us.tolist()):
            tight = TIGHT_REF_US / (TIGHT_REF_US + max(d, 0.0))
            out.append(math.log((1.0 + tight) * (1.0 + p / 100.0)))
        return out

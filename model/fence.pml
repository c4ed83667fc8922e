/*
 * fence.pml: fence's protocol, for the Spin model checker.
 *
 * The lock service issues a fencing token with every grant; the fenced
 * storage accepts a write only if last_fence <= token <= last_token, and
 * raises last_fence to the token; several servers may share one store, and
 * every commit of the leader is conditional on its writer epoch. The model
 * checks that the invariants of docs/DESIGN.md hold in every interleaving
 * of:
 *
 *   - two fence servers sharing one durable store (proctype Server for
 *     their terms; proctype Service for what their lock services do on
 *     their own): a replicated engine (etcd, PostgreSQL), or, when only
 *     one of them ever leads, the embedded journal of one server restarted
 *     after each crash. A server leads under the writer epoch it raised,
 *     keeps the lock state in memory (state.LeaderEngine, and the leases of
 *     lock.Service), and commits every change to the store on the
 *     condition that its epoch is still current (etcd.Store.Commit,
 *     PostgreSQL's fence_commit). Its term may end at any moment (a crash,
 *     kill -9, a shutdown, a lost term noticed): its memory is lost, and
 *     the store keeps every commit. Or it may be paused: another server
 *     takes over, and the paused one, when it wakes, still believes that
 *     it leads and serves from its stale memory.
 *
 *   - three clients on two resources (proctype Client, one for each
 *     client, server and resource), which acquire, write with their token,
 *     renew and release. A client may pause for any time between two
 *     steps: it keeps its token for ever and, waking up, writes, renews
 *     and releases with it, believing that it still holds the lease. It
 *     may also present a token that was never issued (a forged one).
 *
 *   - abstract time: a lease ends when its server's timer fires, which may
 *     happen at any moment after the grant, and only then: a lease ends by
 *     expiry, release or revoke, nothing else.
 *
 * A request is handled by one server that believes it leads (a standby
 * forwards to the leader: the same thing), in one atomic step: the lock
 * service's check on its memory, the rule of package state on the cached
 * record, the commit to the store with its epoch check, and the update of
 * the server's memory. That is sound: a server's memory changes only by
 * its own steps, so what other servers do between its check and its commit
 * they could as well have done before the check; and the commit, epoch
 * check and writes, is atomic in the engine (one etcd Txn; one PostgreSQL
 * transaction that locks the leader row first). The answer to an acquire
 * may be lost (the server crashed after the commit, the connection broke):
 * the lease is recorded, and its holder does not know its token.
 *
 * A request that is refused (from the lock service's memory, or by the
 * rules) changes nothing: that is invariant 5, which holds here by
 * construction, as every rule of package state checks before it changes.
 * So refusals are no steps of the model: each step is guarded by what
 * makes its request go through to a commit.
 *
 * Compile-time switches (spin -DNAME):
 *
 *   NO_FENCE_CHECK    the rule accepts a write whatever its token's age
 *                     (state.checkToken without token < LastFence)
 *   NO_ISSUED_CHECK   the rule accepts a token that was never issued
 *                     (state.checkToken without token > LastToken)
 *   NO_EPOCH_CHECK    commits skip the writer-epoch check
 *                     (state.EngineOptions.UnsafeSkipEpochCheck)
 *   CONSEQUENCES_ONLY leave out P9 and L1, the properties that watch the
 *                     epoch itself, so that with NO_EPOCH_CHECK the model
 *                     must find what a deposed leader does to clients:
 *                     tokens issued twice, fences lowered, leases lost
 *   NO_LOST_ANSWERS   an acquire's answer is never lost
 *   WITNESS=n         fail where scenario n happens (see SEEN), which
 *                     shows that it is reachable
 *   NO_SYMMETRY       store every state as it is (see "Symmetry"): slower,
 *                     but counterexamples keep their names
 *   MAXT, MAXE        the bounds (below)
 *
 * Properties: P1 .. P9 are assertions, each named after the invariant of
 * docs/DESIGN.md ("Invariants", numbered there) that it encodes; L1 is a
 * lemma the others rest on. commit() checks those about a change before it
 * applies it; the Monitor checks those about a state in every state.
 */

/* ------------------------------------------------------------------ */
/* Sizes and bounds                                                    */

#define NS 2            /* servers: the code below names 0 and 1 */
#define NC 3            /* clients: the code below names 0, 1 and 2 */
#define NR 2            /* resources: the code below names 0 and 1 */

#ifndef MAXT
#define MAXT 3          /* tokens per resource: the model's fence.MaxToken (state.ErrTokensExhausted beyond); at most 7 */
#endif
#ifndef MAXE
#define MAXE 4          /* writer epochs: terms of leadership, the first one, takeovers and restarts */
#endif

#define FORGED (MAXT+1) /* a token that is never issued */

/* ------------------------------------------------------------------ */
/* The store: durable, shared by the servers, untouched by crashes.    */

/* A resource's record, state.Resource. TTL, expiry and lock-delay are
 * left out: time is abstract. So are the entries (the values under keys)
 * and the store revision: no rule reads an entry's token, and what the
 * properties need of them, the highest token ever accepted, is at most
 * fenceHW below. */
typedef Res {
	byte lastToken;  /* LastToken: the highest token issued */
	byte lastFence;  /* LastFence: the highest token accepted by storage or raised by a grant */
	byte leaseToken; /* LeaseToken: the recorded lease's token; 0: none */
	byte holder;     /* Holder: the recorded lease's holder, client+1; 0: none */
};

Res  store[NR];      /* the records: etcd "r/<name>", PostgreSQL fence_resources, the journal's */
byte epoch;          /* the writer epoch: etcd "epoch", fence_leader.epoch; 0 before the first term */

/* ------------------------------------------------------------------ */
/* The servers: memory, lost when a term ends.                         */

bool leads[NS];      /* it believes it leads: it has a term, and its state.DB has not failed */
byte term[NS];       /* the epoch its term raised (state.Term.Epoch); 0 while not leading */
Res  cache[NS*NR];   /* its copy of the records: state.LeaderEngine.resources, and with them the
                      * leases that lock.Service keeps in memory (entry.lease); zero while
                      * not leading */

/* ------------------------------------------------------------------ */
/* The clients.                                                        */

byte tok[NC*NR];     /* the latest token the client was given for the resource; 0: none.
                      * Never forgotten: a client that paused past its TTL still uses it. */

/* ------------------------------------------------------------------ */
/* Ghosts: what has happened, for the properties. They only grow, and  */
/* in a correct run they equal the store's fields, so they add no      */
/* states.                                                             */

byte issued[NR];     /* the highest token ever issued by a commit */
byte fenceHW[NR];    /* the highest last_fence ever committed: >= every token ever accepted */

/* Scratch of the atomic steps (d_step), not part of the state. */
hidden byte kind;    /* what the commit does: K_* */
hidden byte old;     /* the lease token a commit ends or refreshes */
hidden byte tkn;     /* the token a commit issues, or a write presents */
hidden byte applied; /* the commit was applied */
hidden byte rj;       /* a loop's index */
hidden byte nlt, nlf, nlease, nholder; /* the record as the transaction leaves it (state.Overlay) */

#define K_GRANT   1  /* state.Grant on a free resource */
#define K_HANDOFF 2  /* state.Handoff: the lease `old` ends and a waiter is granted, in one commit */
#define K_REFRESH 3  /* state.Refresh: a renew, or an acquire retried by the holder */
#define K_END     4  /* state.End: a release, or an expiry with nobody waiting */
#define K_REVOKE  5  /* state.Revoke: the next token straight into the fence, no lease */
#define K_WRITE   6  /* state.Put: a fenced write */

/* Witnesses: with -DWITNESS=n, the model fails where scenario n happens,
 * which shows that it is reachable, so that the properties hold for a
 * reason and not because nothing happens:
 *   1  a deposed server's commit is refused;
 *   2  a zombie's write passes a deposed server's rule (its commit is then
 *      refused);
 *   3  a lease ends, and goes to a waiter, in one commit;
 *   4  a holder who lost its answer retries, and gets its token;
 *   5  a revoke ends a recorded lease;
 *   6  a write is accepted after a takeover or a restart;
 *   7  a takeover or a restart restores a recorded lease. */
#ifdef WITNESS
#define SEEN(n) assert(WITNESS != (n))
#else
#define SEEN(n) skip
#endif

#define C(s, r)   cache[(s)*NR + (r)]
#define TOK(c, r) tok[(c)*NR + (r)]

/* The epoch check of a commit. etcd: the Txn compares the "epoch" key with
 * the record this server wrote when it raised its epoch. PostgreSQL:
 * fence_commit updates the leader row WHERE epoch = e, and raises FE001
 * if no row matched. Either way it is atomic with the commit's writes, and
 * a commit that fails it returns state.ErrDeposed. */
#ifdef NO_EPOCH_CHECK
#define EPOCH_HOLDS(s) true
#else
#define EPOCH_HOLDS(s) (term[s] == epoch)
#endif

/* The rule of fenced storage, state.checkToken, on the leader's cached
 * record: LastFence <= token <= LastToken. */
#ifdef NO_FENCE_CHECK
#define FENCE_OK(s, r, tk) true
#else
#define FENCE_OK(s, r, tk) ((tk) >= C(s, r).lastFence)
#endif
#ifdef NO_ISSUED_CHECK
#define ISSUED_OK(s, r, tk) true
#else
#define ISSUED_OK(s, r, tk) ((tk) <= C(s, r).lastToken)
#endif

/* ------------------------------------------------------------------ */
/* Terms of leadership                                                 */

/* Server s takes the lead. state.Elector.Campaign raises the writer epoch
 * with a compare-and-swap, so at most one server raises each epoch; then
 * state.NewLeaderEngine loads every record (after the raise), and
 * lock.Service.Open restores every recorded lease with a full TTL: it
 * stays live until this server's own timer ends it. The engine makes a
 * candidate wait until the old leader's lease has passed (etcd's election,
 * fence_leader.expires); the model lets it take over at any time, which
 * only adds behaviours, among them every pause of a leader. */
inline campaign(s) {
	epoch++;
	term[s] = epoch;
	leads[s] = 1;
	rj = 0;
	do
	:: rj < NR ->
		C(s, rj).lastToken = store[rj].lastToken;
		C(s, rj).lastFence = store[rj].lastFence;
		C(s, rj).leaseToken = store[rj].leaseToken;
		C(s, rj).holder = store[rj].holder;
		if
		:: store[rj].leaseToken != 0 -> SEEN(7) /* a takeover or restart restored a lease */
		:: else -> skip
		fi;
		rj++
	:: else -> break
	od;
	printf("S%d leads, epoch %d\n", s, epoch)
}

/* Server s's term ends: it crashed or was killed -9, it shut down and
 * resigned, it noticed that its term was lost (state.Term.Done), or a
 * commit returned state.ErrDeposed and its DB failed. server.node.lead
 * returns: the lock service is drained (waiters get fence.ErrClosed), the
 * cache is dropped. The store keeps everything committed: a commit is
 * durable before it is applied in memory and acknowledged (the journal
 * fdatasyncs its log first; etcd and PostgreSQL replicate first). */
inline stepDown(s) {
	leads[s] = 0;
	term[s] = 0;
	rj = 0;
	do
	:: rj < NR ->
		C(s, rj).lastToken = 0; C(s, rj).lastFence = 0;
		C(s, rj).leaseToken = 0; C(s, rj).holder = 0;
		rj++
	:: else -> break
	od;
	printf("S%d steps down\n", s)
}

/* ------------------------------------------------------------------ */
/* Transactions                                                        */

/* A transaction starts from the cached record (state.Overlay over the
 * state.LeaderEngine). */
inline fromCache(s, r) {
	nlt = C(s, r).lastToken;
	nlf = C(s, r).lastFence;
	nlease = C(s, r).leaseToken;
	nholder = C(s, r).holder
}

/* state.Grant: the next token, the fence raised to it, the lease recorded. */
inline grantRec(s, r, c) {
	tkn = C(s, r).lastToken + 1;
	nlt = tkn;
	nlf = (C(s, r).lastFence > tkn -> C(s, r).lastFence : tkn);
	nlease = tkn;
	nholder = c + 1
}

/* state.LeaderEngine.Update: commit the transaction's record of resource r to
 * the store if the epoch check passes (state.Remote.Commit), then keep it
 * in memory. The whole record is
 * written, as etcd's OpPut and PostgreSQL's upsert of fence_resources do.
 * If the check fails, nothing is applied, the DB fails, and the server
 * steps down. */
inline commit(s, r) {
	if
	:: EPOCH_HOLDS(s) ->
		applied = 1;
#ifndef CONSEQUENCES_ONLY
		/* P9 (invariant 9): a server that has lost its writer epoch
		 * commits and acknowledges nothing: every commit applied is
		 * one of the current epoch. */
		assert(term[s] == epoch);
#endif
		/* P2 (invariant 2): last_fence never decreases. */
		assert(nlf >= store[r].lastFence);
		/* P1 (invariant 1): the token counter never goes back. */
		assert(nlt >= store[r].lastToken);
		if
		:: kind == K_GRANT || kind == K_HANDOFF || kind == K_REVOKE ->
			/* P1 (invariant 1): per resource, every grant's token is
			 * greater than every token issued before it, across
			 * releases, expiries, restarts and leader changes: no
			 * token is issued twice. */
			assert(tkn > issued[r]);
			issued[r] = tkn
		:: else -> skip
		fi;
		if
		:: kind == K_GRANT ->
			/* P7 (invariant 7; one lease per resource): a grant is
			 * committed only while no lease is recorded: an unexpired
			 * lease survives restarts and failovers, and no one else
			 * gets the lock before it ends. */
			assert(store[r].leaseToken == 0)
		:: kind == K_HANDOFF || kind == K_REFRESH || kind == K_END ->
			/* P6 (invariant 6): a renew, release or expiry changes
			 * only the lease it names: a stale renew or release never
			 * touches a newer lease. */
			assert(old != 0 && store[r].leaseToken == old)
		:: else -> skip
		fi;
		/* P7 (invariant 7): a recorded lease ends by its expiry, its
		 * release, or a revoke, never as a side effect of another
		 * change, nor early by another server's say. */
		assert(store[r].leaseToken == 0 || nlease == store[r].leaseToken ||
		       kind == K_REVOKE || (kind == K_END || kind == K_HANDOFF) && old == store[r].leaseToken);
		if
		:: kind == K_WRITE ->
			/* P2 (invariant 2): a write to fence's storage is
			 * accepted only if last_fence <= token: a write with a
			 * token lower than the fence is rejected, ... */
			assert(store[r].lastFence <= tkn);
			/* ... and only if token <= last_token: a token that was
			 * never issued (a forged one) is rejected. */
			assert(tkn <= store[r].lastToken);
			/* P2 (invariant 2): the tokens the storage accepts per
			 * resource never decrease: a holder's write after a newer
			 * holder's write, or after a newer grant's fence, is
			 * rejected. */
			assert(tkn >= fenceHW[r]);
			/* P3 (invariant 3): a grant raises last_fence before it
			 * is acknowledged, so a zombie is rejected even before the
			 * new holder writes: an accepted write carries the newest
			 * token issued for its resource. */
			assert(tkn >= issued[r])
		:: else -> skip
		fi;
		if
		:: kind == K_HANDOFF -> SEEN(3) /* a lease ended, and went to a waiter, in one commit */
		:: kind == K_REVOKE && old != 0 -> SEEN(5) /* a revoke ended a recorded lease */
		:: kind == K_WRITE && epoch > 1 -> SEEN(6) /* a write was accepted after a takeover or restart */
		:: else -> skip
		fi;
		store[r].lastToken = nlt;
		store[r].lastFence = nlf;
		store[r].leaseToken = nlease;
		store[r].holder = nholder;
		fenceHW[r] = (nlf > fenceHW[r] -> nlf : fenceHW[r]);
		C(s, r).lastToken = nlt;
		C(s, r).lastFence = nlf;
		C(s, r).leaseToken = nlease;
		C(s, r).holder = nholder
	:: else ->
		applied = 0;
		printf("S%d: commit refused, deposed (epoch %d, its own %d)\n", s, epoch, term[s]);
		SEEN(1); /* a deposed server's commit was refused */
		stepDown(s)
	fi
}

/* ------------------------------------------------------------------ */
/* Requests, as lock.Service and state.DB handle them                  */

/* lock.Service.Acquire of a free resource by client c: grantLocked,
 * state.Grant. learn is 0 when the answer is lost. */
inline grant(s, r, c, learn) {
	kind = K_GRANT; old = 0;
	grantRec(s, r, c);
	if
	:: learn -> printf("S%d grants R%d to C%d: token %d\n", s, r, c, tkn)
	:: else -> printf("S%d grants R%d to C%d: token %d; the answer is lost\n", s, r, c, tkn)
	fi;
	commit(s, r);
	if
	:: applied && learn -> TOK(c, r) = tkn
	:: else -> skip
	fi
}

/* state.Refresh of the lease, for client c, its holder: lock.Service.Renew
 * with the lease's token (leaseLostLocked checked it in memory; the rule
 * checks it again on the record), or lock.Service.Acquire retried by the
 * holder, which gets the lease's token again (refreshLocked). */
inline refresh(s, r, c) {
	kind = K_REFRESH; old = C(s, r).leaseToken;
	fromCache(s, r);
	printf("S%d renews R%d for C%d: token %d\n", s, r, c, old);
	commit(s, r);
	if
	:: applied && TOK(c, r) != old ->
		SEEN(4); /* a holder who lost its answer retried, and got its token */
		TOK(c, r) = old
	:: else -> skip
	fi
}

/* state.Put through state.DB with token tk, which passed the rule
 * (ISSUED_OK, FENCE_OK) on the cached record. */
inline write(s, r, c, tk) {
	kind = K_WRITE; tkn = tk; old = 0;
	fromCache(s, r);
	nlf = tkn; /* state.write: r.LastFence = token */
	printf("S%d: C%d writes R%d with token %d, which its rule accepts (its fence %d, the store's %d)\n",
		s, c, r, tkn, C(s, r).lastFence, store[r].lastFence);
	if
	:: term[s] != epoch && tkn < store[r].lastFence ->
		SEEN(2) /* a zombie's write passed a deposed server's rule */
	:: else -> skip
	fi;
	commit(s, r)
}

/* The lease ends at server s, released (lock.Service.Release) or expired
 * (its timer fired: expireLocked), with nobody waiting: passLocked,
 * state.End. */
inline endAlone(s, r) {
	kind = K_END; old = C(s, r).leaseToken;
	fromCache(s, r);
	nlease = 0; nholder = 0;
	printf("S%d ends R%d's lease, token %d\n", s, r, old);
	commit(s, r)
}

/* The lease ends, released, expired or transferred, and the resource goes
 * to a waiter, client w, in the same commit: passLocked, state.Handoff.
 * Who waits is left open: any client but the holder may have been waiting,
 * in any order (a superset of first come, first served, and of a transfer
 * to a named waiter, lock.Service.Transfer). HANDOFF_KEEPS_OLD, a negative
 * control, leaves the fence where it was, as a hand-over that kept the old
 * token valid until the successor writes would. */
inline handOff(s, r, w) {
	kind = K_HANDOFF; old = C(s, r).leaseToken;
	grantRec(s, r, w);
#ifdef HANDOFF_KEEPS_OLD
	nlf = C(s, r).lastFence;
#endif
	printf("S%d ends R%d's lease, token %d, and grants it to C%d: token %d\n", s, r, old, w, tkn);
	commit(s, r);
	if
	:: applied -> TOK(w, r) = tkn
	:: else -> skip
	fi
}

/* lock.Service.Revoke, by an operator: state.Revoke issues the next token
 * straight into the fence, and ends the recorded lease, if any. The
 * waiters are served next, as on any free resource (a later grant). */
inline revoke(s, r) {
	kind = K_REVOKE; old = C(s, r).leaseToken;
	tkn = C(s, r).lastToken + 1;
	nlt = tkn;
	nlf = (C(s, r).lastFence > tkn -> C(s, r).lastFence : tkn);
	nlease = 0; nholder = 0;
	printf("S%d revokes R%d: fence %d\n", s, r, tkn);
	commit(s, r)
}

/* ------------------------------------------------------------------ */
/* Symmetry                                                            */
/*                                                                     */
/* The two servers are interchangeable in the model, and so are the    */
/* two resources and the three clients: their processes run the same   */
/* code, the branch lists treat them alike, and so does every          */
/* property. Between two steps a process holds nothing of its own (its */
/* steps are d_steps from the top of its loop), so renaming servers,   */
/* resources or clients in the variables maps a reachable state to a   */
/* reachable state that behaves the same and breaks the same           */
/* properties. canon() therefore renames, after every step, to a       */
/* canonical order: servers by term (the higher first), resources and  */
/* clients by all that is theirs. This symmetry reduction changes no   */
/* verdict, only the number of states stored (some 21 times fewer; the */
/* test's figures are in README.md, and -DNO_SYMMETRY checks without   */
/* it). A variable added to the model must be added here too, to the   */
/* keys and to the swaps.                                              */

hidden byte sx;
hidden int ka, kb, la, lb;

inline swapB(a, b) { sx = a; a = b; b = sx }

inline swapRes(x, y) {
	swapB(x.lastToken, y.lastToken);
	swapB(x.lastFence, y.lastFence);
	swapB(x.leaseToken, y.leaseToken);
	swapB(x.holder, y.holder)
}

/* A record as a number, 3 bits a field (MAXT <= 7). */
#define RKEY(x) ((((x.lastToken * 8) + x.lastFence) * 8 + x.leaseToken) * 8 + x.holder)

/* k := client c's part in the state: its tokens, and the records that
 * name it as their holder. */
#define HB(h, c) ((h) == (c) + 1 -> 1 : 0)
inline clientKey(k, c) {
	k = TOK(c, 0) * 8 + TOK(c, 1);
	k = k * 2 + HB(store[0].holder, c);
	k = k * 2 + HB(store[1].holder, c);
	k = k * 2 + HB(C(0, 0).holder, c);
	k = k * 2 + HB(C(0, 1).holder, c);
	k = k * 2 + HB(C(1, 0).holder, c);
	k = k * 2 + HB(C(1, 1).holder, c)
}

#define RENAME(h, a, b) h = ((h) == (a) + 1 -> (b) + 1 : ((h) == (b) + 1 -> (a) + 1 : (h)))

/* Clients a and b trade names if they are out of order. */
inline sortClients(a, b) {
	clientKey(ka, a);
	clientKey(kb, b);
	if
	:: ka > kb ->
		swapB(TOK(a, 0), TOK(b, 0));
		swapB(TOK(a, 1), TOK(b, 1));
		RENAME(store[0].holder, a, b);
		RENAME(store[1].holder, a, b);
		RENAME(C(0, 0).holder, a, b);
		RENAME(C(0, 1).holder, a, b);
		RENAME(C(1, 0).holder, a, b);
		RENAME(C(1, 1).holder, a, b)
	:: else -> skip
	fi
}

inline canon() {
#ifndef NO_SYMMETRY
	/* Servers: the one of the higher term is server 0. Two servers of
	 * the same term both lead no more, and hold nothing. */
	if
	:: term[1] > term[0] ->
		swapB(leads[0], leads[1]);
		swapB(term[0], term[1]);
		swapRes(C(0, 0), C(1, 0));
		swapRes(C(0, 1), C(1, 1))
	:: else -> skip
	fi;
	/* Resources: in the order of everything that is theirs. */
	ka = RKEY(store[0]) * 4096 + RKEY(C(0, 0));
	la = RKEY(store[1]) * 4096 + RKEY(C(0, 1));
	kb = ((RKEY(C(1, 0)) * 8 + TOK(0, 0)) * 8 + TOK(1, 0)) * 8 + TOK(2, 0);
	kb = (kb * 8 + issued[0]) * 8 + fenceHW[0];
	lb = ((RKEY(C(1, 1)) * 8 + TOK(0, 1)) * 8 + TOK(1, 1)) * 8 + TOK(2, 1);
	lb = (lb * 8 + issued[1]) * 8 + fenceHW[1];
	if
	:: ka > la || ka == la && kb > lb ->
		swapRes(store[0], store[1]);
		swapRes(C(0, 0), C(0, 1));
		swapRes(C(1, 0), C(1, 1));
		swapB(TOK(0, 0), TOK(0, 1));
		swapB(TOK(1, 0), TOK(1, 1));
		swapB(TOK(2, 0), TOK(2, 1));
		swapB(issued[0], issued[1]);
		swapB(fenceHW[0], fenceHW[1])
	:: else -> skip
	fi;
	/* Clients: sorted by all they hold (three compare-and-swaps sort
	 * three). */
	sortClients(0, 1);
	sortClients(1, 2);
	sortClients(0, 1);
	ka = 0; kb = 0; la = 0; lb = 0;
#endif
	sx = 0
}

/* ------------------------------------------------------------------ */
/* The properties of every reachable state                             */

/* P4 (invariant 4): what was committed, and so acknowledged (grants,
 * releases, fences, writes), is durable: it survives crashes, restarts
 * and leader changes. */
#define P4(r) (store[r].lastToken >= issued[r] && store[r].lastFence >= fenceHW[r])
/* P2 (invariant 2): the fence is a token that was issued. */
#define P2(r) (store[r].lastFence <= store[r].lastToken)
/* P3 (invariant 3): the fence is at least the recorded lease's token. */
#define P3(r) (store[r].leaseToken == 0 || store[r].lastFence >= store[r].leaseToken)
/* P1, P7 (invariants 1, 7): at most one lease per resource is live, and it
 * has the newest token issued. */
#define P17(r) (store[r].leaseToken == 0 || store[r].leaseToken == store[r].lastToken)

/* L1 (lemma of invariants 7 and 9): the memory of the server of the
 * current epoch is the store, so the leases it serves are the recorded
 * ones. */
#define SAME(x, y) (x.lastToken == y.lastToken && x.lastFence == y.lastFence && x.leaseToken == y.leaseToken && x.holder == y.holder)
#ifdef CONSEQUENCES_ONLY
#define L1(s) true
#else
#define L1(s) (!(leads[s] && term[s] == epoch) || SAME(C(s, 0), store[0]) && SAME(C(s, 1), store[1]))
#endif

#define RES_OK(r) (P4(r) && P2(r) && P3(r) && P17(r))

/* The monitor can take its one step only in a state where a property
 * fails; it then reports the first that fails. */
proctype Monitor() {
end:	d_step {
		!(RES_OK(0) && RES_OK(1) && L1(0) && L1(1)) ->
		assert(P4(0)); assert(P2(0)); assert(P3(0)); assert(P17(0));
		assert(P4(1)); assert(P2(1)); assert(P3(1)); assert(P17(1));
		assert(L1(0)); assert(L1(1))
	}
}

/* ------------------------------------------------------------------ */
/* The processes. Every step is one d_step: atomic, with no state      */
/* stored inside it, and able to finish once its guard holds.          */

#define STEP(guard, action) :: d_step { guard -> action; canon() }

/* A fence server's terms (server.node: campaign, lead, step down): on a
 * shared store; or, with the other server never campaigning, on the
 * embedded store, restarted after each crash. */
proctype Server(byte s) {
end:	do
	/* state.Elector.Campaign, state.NewLeaderEngine, lock.Service.Open */
	STEP(!leads[s] && epoch < MAXE, campaign(s))
	/* the term ends: a crash, kill -9, a shutdown, Term.Done */
	STEP(leads[s], stepDown(s))
	od
}

#define LEASED(s, r)      (leads[s] && C(s, r).leaseToken != 0)
#define CAN_HAND(s, r, w) (LEASED(s, r) && C(s, r).holder != (w) + 1 && C(s, r).lastToken < MAXT)

/* The lock service of server s, on its own, about resource r: the lease's
 * timer fires and ends it, alone or handing the lock to a waiter; an
 * operator revokes. */
proctype Service(byte s; byte r) {
end:	do
	STEP(LEASED(s, r), endAlone(s, r))
	STEP(CAN_HAND(s, r, 0), handOff(s, r, 0))
	STEP(CAN_HAND(s, r, 1), handOff(s, r, 1))
	STEP(CAN_HAND(s, r, 2), handOff(s, r, 2))
	STEP(leads[s] && C(s, r).lastToken < MAXT, revoke(s, r))
	od
}

#define FREE(s, r)           (leads[s] && C(s, r).leaseToken == 0 && C(s, r).lastToken < MAXT)
#define HOLDS(s, r, c)       (leads[s] && C(s, r).leaseToken != 0 && C(s, r).holder == (c) + 1)
#define MINE(s, r, c)        (leads[s] && TOK(c, r) != 0 && C(s, r).leaseToken == TOK(c, r))
#define CAN_HAND_ME(s, r, c, w) (MINE(s, r, c) && (w) != (c) && C(s, r).lastToken < MAXT)
#define ACCEPTS(s, r, tk)    (leads[s] && (tk) != 0 && ISSUED_OK(s, r, tk) && FENCE_OK(s, r, tk))

#ifdef NO_LOST_ANSWERS
#define LOST_GRANT(s, r, c)
#else
#define LOST_GRANT(s, r, c) STEP(FREE(s, r), grant(s, r, c, 0))
#endif

/* Client c's requests to server s about resource r: acquire (granted, its
 * answer maybe lost; or retried by the holder who lost it), write with its
 * token, write with a forged token, renew, release (alone, or handing the
 * lock to a waiter). The client (fence.Session, the CLI, any program) may
 * pause at any point, and come back with its old token. */
proctype Client(byte c; byte s; byte r) {
end:	do
	STEP(FREE(s, r), grant(s, r, c, 1))
	LOST_GRANT(s, r, c)
	STEP(HOLDS(s, r, c) && !MINE(s, r, c), refresh(s, r, c))
	STEP(ACCEPTS(s, r, TOK(c, r)), write(s, r, c, TOK(c, r)))
	STEP(ACCEPTS(s, r, FORGED), write(s, r, c, FORGED))
	STEP(MINE(s, r, c), refresh(s, r, c))
	STEP(MINE(s, r, c), endAlone(s, r))
	STEP(CAN_HAND_ME(s, r, c, 0), handOff(s, r, 0))
	STEP(CAN_HAND_ME(s, r, c, 1), handOff(s, r, 1))
	STEP(CAN_HAND_ME(s, r, c, 2), handOff(s, r, 2))
	od
}

init {
	atomic {
		run Server(0); run Server(1);
		run Service(0, 0); run Service(0, 1); run Service(1, 0); run Service(1, 1);
		run Client(0, 0, 0); run Client(0, 0, 1); run Client(0, 1, 0); run Client(0, 1, 1);
		run Client(1, 0, 0); run Client(1, 0, 1); run Client(1, 1, 0); run Client(1, 1, 1);
		run Client(2, 0, 0); run Client(2, 0, 1); run Client(2, 1, 0); run Client(2, 1, 1);
		run Monitor()
	}
}

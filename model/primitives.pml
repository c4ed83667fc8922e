/*
 * primitives.pml: fence's primitives beyond one exclusive lease, for the
 * Spin model checker: shared (read) groups beside exclusive leases, the
 * downgrade, multi-acquires of two resources, the permits of a semaphore,
 * and sessions. fence.pml models the protocol under them (servers, the
 * writer epoch, takeovers, hand-overs); this model takes one lock service
 * on a durable store, whose every step is one commit, and checks what each
 * primitive adds, in every interleaving of:
 *
 *   - three clients (proctype Client), each of which may at any moment
 *     acquire a resource exclusively or shared, downgrade its exclusive
 *     lease, release, take both resources at once, take a permit of the
 *     semaphore, open or close its session and acquire in it, and write
 *     with any token it was given. A client never forgets a token: paused,
 *     it wakes and writes with it, believing it still holds.
 *
 *   - the lock service on its own (proctype Service): any lease, shared
 *     hold, permit or session may expire at any moment; an operator may
 *     revoke a resource; a session's end ends its leases, each in a commit
 *     of its own (lock.Service.endSession), some time later.
 *
 * Compile-time switches (spin -DNAME), each a negative control that the
 * checker must catch:
 *
 *   SHARED_TOKEN_REUSED  a new shared group is given the last group's
 *                        token instead of the next one (state.Share
 *                        without the next token), so a paused exclusive
 *                        holder's token is above the group's
 *   SHARED_BESIDE_EXCL   a shared acquire does not check for an exclusive
 *                        lease (lock.Service.AcquireShared's switch)
 *   MULTI_HALF           a multi-acquire commits its first resource, and
 *                        then the second in a commit of its own, or gives
 *                        up (state.GrantAll split in two)
 *   PERMIT_ANY_SLOT      a permit is granted on a slot that is held
 *                        (tryPermitLocked without its free-slot check)
 *   SESSION_JOIN_ENDED   an acquire joins a session without checking that
 *                        it is open (lock.Service.joinSession)
 *
 *   WITNESS=n            fail where scenario n happens, to show that it is
 *                        reachable: 1 a group of two shares a token; 2 a
 *                        paused exclusive holder's write is refused after a
 *                        group; 3 a downgrade; 4 a multi-acquire; 5 two
 *                        permits held at once; 6 a session's end ends a
 *                        lease in it.
 */

/* PART says which primitive a run checks, each on the smallest world
 * that shows its faults: 1 shared groups beside exclusive leases (three
 * clients, one resource); 2 multi-acquires (two clients, two resources);
 * 3 permits (three clients, a semaphore of two slots); 4 sessions (two
 * clients, one resource). Checking them apart keeps each search small
 * and exhaustive; they share no state. */
#ifndef PART
#define PART 1
#endif
#if PART == 1 || PART == 3
#define NC 3   /* clients */
#else
#define NC 2
#endif
#if PART == 2
#define NR 2   /* resources R0, R1 */
#else
#define NR 1
#endif
#define NS 2   /* the slots of the semaphore, limit 2 */
#ifndef MAXT
#define MAXT 4 /* tokens per resource */
#endif
#define NONE 255

/* The store, per resource: what state.Resource records. */
byte lastToken[NR];
byte lastFence[NR];
byte excl[NR];     /* the exclusive lease's holder, NONE if none */
byte exclTok[NR];  /* its token; the last one's, after it ended */
byte group[NR];    /* the shared group's holders, a bit per client */
byte groupTok[NR]; /* the shared group's token; also the last group's, after it ended */
byte exclSess[NR]; /* the session the exclusive lease is in, NONE if none */

/* The semaphore's slots: each an exclusive lease of its own, with its own
 * tokens and fence. */
byte slotHolder[NS];
byte slotToken[NS];
byte slotFence[NS];
byte permitOf[NC]; /* the slot client c holds a permit on, NONE if none */

/* Sessions: one per client, open or not. */
bool sessOpen[NC];

/* What clients remember: their latest token per resource and per slot. */
byte tok[NC * NR];     /* TOK(c, r) */
byte slotTok[NC * NS]; /* STOK(c, i) */
#define TOK(c, r) tok[(c) * NR + (r)]
#define STOK(c, i) slotTok[(c) * NS + (i)]

/* Ghost: the token of the latest grant (or revoke) of each resource. */
byte latest[NR];

#define BIT(c) (1 << (c))

/* The checks that the negative controls remove. */
#ifdef SESSION_JOIN_ENDED
#define JOIN_OK(c) true
#else
#define JOIN_OK(c) sessOpen[c]
#endif
#ifdef SHARED_BESIDE_EXCL
#define NO_EXCL(r) true
#else
#define NO_EXCL(r) (excl[r] == NONE)
#endif
#ifdef PERMIT_ANY_SLOT
#define SLOT_FREE(i) true
#else
#define SLOT_FREE(i) (slotHolder[i] == NONE)
#endif
#define HELD(r) (excl[r] != NONE || group[r] != 0)

/* newToken issues resource r's next token and raises its fence to it:
 * every grant and revoke does (state.Grant, state.Share, state.Revoke). */
inline newToken(nr, nt) {
	lastToken[nr]++;
	nt = lastToken[nr];
	lastFence[nr] = nt;
	latest[nr] = nt
}

/* grantExcl grants resource r to client c exclusively (state.Grant), in
 * session s (NONE for none). */
inline grantExcl(gc, gr, gs) {
	newToken(gr, t);
	excl[gr] = gc;
	exclTok[gr] = t;
	exclSess[gr] = gs;
	TOK(gc, gr) = t
}

/* write is a fenced write by client c to resource r with the token it
 * remembers (state.checkToken: last_fence <= token <= last_token). */
inline write(wc, wr) {
	if
	:: TOK(wc, wr) != 0 && lastFence[wr] <= TOK(wc, wr) && TOK(wc, wr) <= lastToken[wr] ->
		/* S2: a write is accepted only with the latest grant's token:
		 * that of the exclusive lease or of the shared group that holds
		 * the resource now, or held it last. A paused holder of an older
		 * grant, exclusive or shared, is fenced. */
		assert(TOK(wc, wr) == latest[wr]);
#if WITNESS == 1
		assert(!(group[wr] != 0 && (group[wr] & (group[wr] - 1)) != 0));
#endif
		lastFence[wr] = TOK(wc, wr)
	:: else ->
#if WITNESS == 2
		assert(!(TOK(wc, wr) != 0 && TOK(wc, wr) == exclTok[wr] && group[wr] != 0));
#endif
		skip
	fi
}

/* Each step is one atomic commit: it chooses what it is about, and then
 * either goes through or is refused, changing nothing (invariant 5). */

proctype Client(byte c) {
	byte r, t, i, n;
	do
#if PART != 3
	/* Acquire exclusively: only while nobody holds the resource,
	 * exclusively or shared. */
	:: atomic { select(r : 0 .. NR - 1);
		if
		:: !HELD(r) && lastToken[r] < MAXT -> grantExcl(c, r, NONE)
		:: else
		fi }
#endif
#if PART == 4
	/* Acquire exclusively in its session, which must be open. */
	:: atomic { select(r : 0 .. NR - 1);
		if
		:: !HELD(r) && lastToken[r] < MAXT && JOIN_OK(c) ->
			/* I12: no lease joins a session that has ended. */
			assert(sessOpen[c]);
			grantExcl(c, r, c)
		:: else
		fi }
#endif
#if PART == 1
	/* Acquire shared: start a group with the next token, or join the one
	 * that holds. */
	:: atomic { select(r : 0 .. NR - 1);
		if
		:: (group[r] & BIT(c)) == 0 && (group[r] != 0 || lastToken[r] < MAXT) && NO_EXCL(r) ->
			if
			:: group[r] == 0 ->
#ifdef SHARED_TOKEN_REUSED
				if
				:: groupTok[r] != 0 -> latest[r] = groupTok[r]
				:: else -> newToken(r, t); groupTok[r] = t
				fi
#else
				newToken(r, t);
				groupTok[r] = t
#endif
			:: else
			fi;
			group[r] = group[r] | BIT(c);
			TOK(c, r) = groupTok[r]
		:: else
		fi }
	/* Downgrade: the exclusive lease ends and a group with the next token
	 * holds, its holder in it, in one commit (state.Share with from). */
	:: atomic { select(r : 0 .. NR - 1);
		if
		:: excl[r] == c && exclSess[r] == NONE && lastToken[r] < MAXT ->
			excl[r] = NONE;
			newToken(r, t);
			groupTok[r] = t;
			group[r] = BIT(c);
			TOK(c, r) = t;
#if WITNESS == 3
			assert(false);
#endif
			skip
		:: else
		fi }
#endif
#if PART != 3
	/* Release an exclusive lease, or leave a group. */
	:: atomic { select(r : 0 .. NR - 1);
		if
		:: excl[r] == c -> excl[r] = NONE; exclSess[r] = NONE
		:: (group[r] & BIT(c)) != 0 -> group[r] = group[r] & ~BIT(c)
		:: else
		fi }
	/* Write with the token remembered. */
	:: atomic { select(r : 0 .. NR - 1); write(c, r) }
#endif
#if PART == 2
	/* Take both resources at once, all or nothing (state.GrantAll). */
#ifndef MULTI_HALF
	:: atomic {
		if
		:: !HELD(0) && !HELD(1) && lastToken[0] < MAXT && lastToken[1] < MAXT ->
			grantExcl(c, 0, NONE);
			grantExcl(c, 1, NONE);
#if WITNESS == 4
			assert(false);
#endif
			skip
		:: else
		fi }
#else
	:: atomic {
		if
		:: !HELD(0) && lastToken[0] < MAXT -> grantExcl(c, 0, NONE)
		:: else -> goto refusedMulti
		fi };
		atomic {
			if
			:: !HELD(1) && lastToken[1] < MAXT -> grantExcl(c, 1, NONE)
			:: else ->
				/* I11: a refused multi-acquire holds nothing. */
				assert(excl[0] != c)
			fi };
refusedMulti:	skip
#endif
#endif
#if PART == 3
	/* Take a permit: a lease on a free slot of the semaphore. */
	:: atomic { select(i : 0 .. NS - 1);
		if
		:: permitOf[c] == NONE && slotToken[i] < MAXT && SLOT_FREE(i) ->
			slotToken[i]++;
			slotFence[i] = slotToken[i];
			slotHolder[i] = c;
			STOK(c, i) = slotToken[i];
			permitOf[c] = i;
			/* I10: at most NS permits held at once. */
			n = 0;
			for (t : 0 .. NC - 1) {
				if
				:: permitOf[t] != NONE -> n++
				:: else
				fi
			}
			assert(n <= NS);
#if WITNESS == 5
			assert(n < 2);
#endif
			skip
		:: else
		fi }
	:: atomic { permitOf[c] != NONE -> slotHolder[permitOf[c]] = NONE; permitOf[c] = NONE }
	/* A write to a slot with the token remembered: fenced on the slot. */
	:: atomic { select(i : 0 .. NS - 1);
		if
		:: STOK(c, i) != 0 && slotFence[i] <= STOK(c, i) && STOK(c, i) <= slotToken[i] ->
			/* I10: a permit's writes are fenced on its own slot: only
			 * its holder's, or the last holder's while none holds. */
			assert(slotHolder[i] == c || slotHolder[i] == NONE);
			slotFence[i] = STOK(c, i)
		:: else
		fi }
#endif
#if PART == 4
	/* Open and close its session. */
	:: atomic { sessOpen[c] = !sessOpen[c] }
#endif
	od
}

proctype Service() {
	byte r, c, t;
	do
#if PART != 3
	/* Expiries, at any moment; a lease in a session lives as long as it. */
	:: atomic { select(r : 0 .. NR - 1);
		if
		:: excl[r] != NONE && exclSess[r] == NONE -> excl[r] = NONE
		:: else
		fi }
	/* An operator's revoke: the lease or the group ends, and the fence
	 * rises to a token issued to nobody. */
	:: atomic { select(r : 0 .. NR - 1);
		if
		:: lastToken[r] < MAXT ->
			excl[r] = NONE;
			exclSess[r] = NONE;
			group[r] = 0;
			newToken(r, t)
		:: else
		fi }
#endif
#if PART == 1
	:: atomic { select(r : 0 .. NR - 1); select(c : 0 .. NC - 1); group[r] = group[r] & ~BIT(c) }
#endif
#if PART == 3
	:: atomic { select(c : 0 .. NC - 1);
		if
		:: permitOf[c] != NONE -> slotHolder[permitOf[c]] = NONE; permitOf[c] = NONE
		:: else
		fi }
#endif
#if PART == 4
	:: atomic { select(c : 0 .. NC - 1); sessOpen[c] = false }
	/* A session that has ended ends its leases, one commit each. */
	:: atomic { select(r : 0 .. NR - 1);
		if
		:: excl[r] != NONE && exclSess[r] != NONE && !sessOpen[exclSess[r]] ->
			excl[r] = NONE;
			exclSess[r] = NONE;
#if WITNESS == 6
			assert(false);
#endif
			skip
		:: else
		fi }
#endif
	od
}

/* The invariants about a state, in every reachable state. */
active proctype Monitor() {
	byte r;
	do
	:: atomic { select(r : 0 .. NR - 1);
		/* I13: never shared beside exclusive. */
		assert(!(excl[r] != NONE && group[r] != 0));
		/* I3: the fence is at least the holder's token. */
		assert(excl[r] == NONE || lastFence[r] >= exclTok[r]);
		assert(group[r] == 0 || lastFence[r] >= groupTok[r]) }
	od
}

init {
	byte i;
	atomic {
		for (i : 0 .. NR - 1) {
			excl[i] = NONE;
			exclSess[i] = NONE
		}
		for (i : 0 .. NS - 1) {
			slotHolder[i] = NONE
		}
		for (i : 0 .. NC - 1) {
			permitOf[i] = NONE
		}
		for (i : 0 .. NC - 1) {
			run Client(i)
		}
		run Service()
	}
}

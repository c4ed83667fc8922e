package chaos

import (
	"math/rand/v2"
	"slices"
)

// schedule is the order of the faults: rounds in which every kind comes up
// once, in a seeded order, so that each kind comes up early. A favoured kind
// comes up twice before every other fault of a round instead of once.
type schedule struct {
	kinds  []string
	favour string // "" none; else one of kinds
	round  []string
}

func newSchedule(kinds []string, favour string) *schedule {
	if !slices.Contains(kinds, favour) {
		favour = ""
	}
	return &schedule{kinds: slices.Clone(kinds), favour: favour}
}

// next returns the next fault kind, drawing a new round from rng when the
// last one is over; false when every kind has been dropped. Without a
// favoured kind it draws exactly what the harness drew before cluster mode
// (one Shuffle per round), so that a seed gives the same runs as before.
func (s *schedule) next(rng *rand.Rand) (string, bool) {
	if len(s.kinds) == 0 {
		return "", false
	}
	if len(s.round) == 0 {
		s.round = slices.Clone(s.kinds)
		rng.Shuffle(len(s.round), func(i, j int) { s.round[i], s.round[j] = s.round[j], s.round[i] })
		if s.favour != "" {
			s.round = interleave(s.favour, s.round)
		}
	}
	kind := s.round[0]
	s.round = s.round[1:]
	return kind, true
}

// interleave returns the kinds of round other than f, each after two f:
// [f f a f f b]; [f] if there is no other.
func interleave(f string, round []string) []string {
	var out []string
	for _, k := range round {
		if k != f {
			out = append(out, f, f, k)
		}
	}
	if len(out) == 0 {
		out = []string{f}
	}
	return out
}

// drop takes kind out of the schedule for the rest of the run (a postgres
// failover cannot be repeated).
func (s *schedule) drop(kind string) {
	del := func(k string) bool { return k == kind }
	s.kinds = slices.DeleteFunc(s.kinds, del)
	s.round = slices.DeleteFunc(s.round, del)
	if s.favour == kind {
		s.favour = ""
	}
}

package check

import (
	"context"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

// CompareSearch checks each partition of ops with search and with
// porcupine's own checker, and returns their verdicts ("ok", "illegal",
// "unknown"), partition by partition, in name order, and the length of the
// longest prefix search found.
func CompareSearch(ops []history.Op, opts Options) (ours, theirs []string, longest []int) {
	j := newJudge(opts, nil)
	for i := range ops {
		j.scan(&ops[i])
	}
	j.resolve()
	parts := make(map[string]*partition)
	for _, r := range j.resources() {
		parts[r] = &partition{resource: r}
	}
	for i := range ops {
		j.route(&ops[i], i, parts)
	}
	verdict := map[searchResult]string{searchOK: "ok", searchIllegal: "illegal", searchUnknown: "unknown"}
	pverdict := map[porcupine.CheckResult]string{porcupine.Ok: "ok", porcupine.Illegal: "illegal", porcupine.Unknown: "unknown"}
	for _, r := range j.resources() {
		h := newHist(parts[r], j.maxT, opts.FenceOnWrite)
		lops, _ := j.linHistory(h)
		if len(lops) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, l := search(ctx, fencedModel(), lops)
		cancel()
		ours = append(ours, verdict[res])
		longest = append(longest, len(l))
		theirs = append(theirs, pverdict[porcupine.CheckOperationsTimeout(fencedModel(), lops, 30*time.Second)])
	}
	return ours, theirs, longest
}

// SetBatchOps sets how many ops CheckFile reads in one pass, until restore.
func SetBatchOps(n int) (restore func()) {
	old := batchOps
	batchOps = n
	return func() { batchOps = old }
}

package history_test

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/fence-lock/fence/internal/tools/chaos/history"
)

func TestWriter_RoundTrip(t *testing.T) {
	ops := []history.Op{
		{ID: 1, Client: 0, Kind: history.KindAcquire, Resource: "orders", Token: 41, Call: 10, Return: 20, Outcome: history.OK},
		{ID: 2, Client: 0, Kind: history.KindRead, Resource: "orders", Key: "o/1", Call: 21, Return: 30, Outcome: history.OK},
		{ID: 3, Client: 0, Kind: history.KindWrite, Resource: "orders", Key: "o/1", Token: 41, Value: "a\nb\"", Rev: 7, Call: 31, Return: 40, Outcome: history.OK},
		{ID: 4, Client: 1, Kind: history.KindTxn, Rev: 8, Writes: []history.Write{
			{Resource: "orders", Key: "o/1", Value: "x", Token: 42},
			{Resource: "stock", Key: "s", Value: "", Token: 3},
		}, Call: 41, Outcome: history.Unknown, Error: "timeout"},
		{ID: 5, Client: -1, Kind: history.KindRead, Resource: "orders", Key: "o/1", Value: "x", Rev: 8, Call: 50, Return: 51, Outcome: history.OK},
	}
	faults := []history.Fault{
		{Kind: "pause", Client: 3, Start: 5, End: 45, Detail: "SIGSTOP"},
		{Kind: "kill", Client: -1, Start: 46},
	}
	var buf bytes.Buffer
	w := history.NewWriter(&buf)
	for i, op := range ops {
		if err := w.WriteOp(op); err != nil {
			t.Fatal(err)
		}
		if i < len(faults) {
			if err := w.WriteFault(faults[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := strings.Count(buf.String(), "\n"); n != len(ops)+len(faults) {
		t.Fatalf("lines=%d, want %d", n, len(ops)+len(faults))
	}
	gotOps, gotFaults, err := history.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotOps, ops) {
		t.Fatalf("ops=%+v\nwant %+v", gotOps, ops)
	}
	if !reflect.DeepEqual(gotFaults, faults) {
		t.Fatalf("faults=%+v\nwant %+v", gotFaults, faults)
	}
}

func TestWriter_Format(t *testing.T) {
	var buf bytes.Buffer
	w := history.NewWriter(&buf)
	if err := w.WriteOp(history.Op{ID: 7, Client: 2, Kind: history.KindWrite, Resource: "r", Key: "k", Token: 3, Value: "v", Call: 5, Outcome: history.Unknown}); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFault(history.Fault{Kind: "pause", Client: 3, Start: 1, End: 2}); err != nil {
		t.Fatal(err)
	}
	want := `{"id":7,"client":2,"kind":"write","resource":"r","key":"k","token":3,"value":"v","call":5,"outcome":"unknown"}` + "\n" +
		`{"fault":"pause","client":3,"start":1,"end":2}` + "\n"
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
	if err := w.WriteFault(history.Fault{}); err == nil {
		t.Fatal("WriteFault without a kind: no error")
	}
}

func TestWriter_Concurrent(t *testing.T) {
	var buf bytes.Buffer
	w := history.NewWriter(&buf)
	var wg sync.WaitGroup
	const clients, each = 8, 200
	for c := range clients {
		wg.Go(func() {
			for i := range each {
				op := history.Op{ID: int64(c*each + i), Client: c, Kind: history.KindWrite, Value: strings.Repeat("v", i), Outcome: history.OK}
				if err := w.WriteOp(op); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	ops, _, err := history.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != clients*each {
		t.Fatalf("len(ops)=%d, want %d", len(ops), clients*each)
	}
}

func TestRead(t *testing.T) {
	t.Run("BlankLinesAndNoFinalNewline", func(t *testing.T) {
		in := "\n" + `{"id":1,"client":0,"kind":"read","call":1,"return":2,"outcome":"ok"}` + "\n  \r\n" +
			`{"fault":"kill","client":-1,"start":3}`
		ops, faults, err := history.Read(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		if len(ops) != 1 || len(faults) != 1 || faults[0].Kind != "kill" || faults[0].Client != -1 {
			t.Fatalf("ops=%+v faults=%+v", ops, faults)
		}
	})
	t.Run("Empty", func(t *testing.T) {
		ops, faults, err := history.Read(strings.NewReader(""))
		if err != nil || ops != nil || faults != nil {
			t.Fatalf("ops=%v faults=%v err=%v", ops, faults, err)
		}
	})
	good := `{"id":1,"client":0,"kind":"read","call":1,"return":2,"outcome":"ok"}`
	for _, tt := range []struct {
		name, line, want string
	}{
		{"Syntax", `{"id":2,`, "invalid JSON"},
		{"NotObject", `[1,2]`, "not a JSON object"},
		{"Null", `null`, "null"},
		{"TrailingGarbage", `{"id":2} x`, "invalid JSON"},
		{"WrongType", `{"id":"2","kind":"read","outcome":"ok"}`, `member "id"`},
		{"NoKind", `{"id":2,"outcome":"ok"}`, `unknown kind ""`},
		{"BadKind", `{"id":2,"kind":"delete","outcome":"ok"}`, `unknown kind "delete"`},
		{"BadOutcome", `{"id":2,"kind":"read","outcome":"maybe"}`, `unknown outcome "maybe"`},
		{"DuplicateID", `{"id":1,"kind":"read","outcome":"ok"}`, "op id 1 already used on line 1"},
		{"FaultWithoutKind", `{"fault":"","client":1}`, "fault"},
		{"TokenNegative", `{"id":2,"kind":"write","token":-1,"outcome":"ok"}`, `member "token"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := history.Read(strings.NewReader(good + "\n\n" + tt.line + "\n"))
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), "line 3:") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err=%q, want line 3 and %q", err, tt.want)
			}
		})
	}
}

func TestKindOutcomeValid(t *testing.T) {
	for _, k := range []history.Kind{history.KindAcquire, history.KindRead, history.KindWrite, history.KindTxn, history.KindRelease} {
		if !k.Valid() {
			t.Errorf("%q.Valid()=false", k)
		}
	}
	for _, o := range []history.Outcome{history.OK, history.Fenced, history.Rejected, history.Fail, history.Unknown} {
		if !o.Valid() {
			t.Errorf("%q.Valid()=false", o)
		}
	}
	if history.Kind("Write").Valid() || history.Outcome("OK").Valid() {
		t.Error("case-folded constants are valid")
	}
}

// FuzzRead checks that Read never panics and that whatever it accepts
// survives a round trip through Writer unchanged.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"id":1,"client":0,"kind":"write","resource":"r","key":"k","token":5,"value":"v","rev":3,"call":1,"return":2,"outcome":"ok"}`))
	f.Add([]byte(`{"id":1,"client":1,"kind":"txn","writes":[{"resource":"a","key":"k","value":"v","token":1}],"call":1,"outcome":"unknown"}` + "\n" + `{"fault":"pause","client":1,"start":1,"end":2}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ops, faults, err := history.Read(bytes.NewReader(b))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "history: line ") {
				t.Fatalf("error without a line number: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		w := history.NewWriter(&buf)
		for _, op := range ops {
			if err := w.WriteOp(op); err != nil {
				t.Fatal(err)
			}
		}
		for _, fl := range faults {
			if err := w.WriteFault(fl); err != nil {
				t.Fatal(err)
			}
		}
		ops2, faults2, err := history.Read(&buf)
		if err != nil {
			t.Fatalf("re-read: %v\n%s", err, buf.String())
		}
		if !reflect.DeepEqual(ops, ops2) || !reflect.DeepEqual(faults, faults2) {
			t.Fatalf("round trip changed the history:\n%s\nops %+v\n-> %+v\nfaults %+v\n-> %+v",
				buf.String(), ops, ops2, faults, faults2)
		}
	})
}

func ExampleWriter() {
	var buf bytes.Buffer
	w := history.NewWriter(&buf)
	_ = w.WriteOp(history.Op{ID: 1, Client: 0, Kind: history.KindAcquire, Resource: "orders", Token: 41, Call: 100, Return: 250, Outcome: history.OK})
	_ = w.WriteOp(history.Op{ID: 2, Client: 0, Kind: history.KindWrite, Resource: "orders", Key: "o-1", Token: 41, Value: "paid", Call: 300, Return: 900, Outcome: history.Fenced, Error: "fenced: last fence 42"})
	_ = w.WriteFault(history.Fault{Kind: "pause", Client: 0, Start: 260, End: 800})
	ops, faults, _ := history.Read(&buf)
	fmt.Println(len(ops), ops[1].Outcome, len(faults), faults[0].Kind)
	// Output: 2 fenced 1 pause
}

func TestReader(t *testing.T) {
	in := `{"id":1,"client":0,"kind":"read","resource":"r","key":"k","call":1,"return":2,"outcome":"ok"}` + "\n\n" +
		`{"fault":"kill","client":-1,"start":3}` + "\n" +
		`{"id":1,"client":1,"kind":"write","resource":"r","key":"k","value":"v","token":2,"call":4,"outcome":"unknown"}`
	r := history.NewReader(strings.NewReader(in))
	var got []history.Entry
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if len(got) != 3 || got[0].Line != 1 || !got[1].IsFault || got[1].Line != 3 || got[2].Line != 4 {
		t.Fatalf("entries %+v", got)
	}
	// A Reader keeps nothing: the duplicate id is Read's to refuse.
	if got[2].Op.ID != 1 || got[2].Op.Kind != history.KindWrite || got[2].Op.Outcome != history.Unknown || got[2].Op.Value != "v" {
		t.Fatalf("op %+v", got[2].Op)
	}
	if _, _, err := history.Read(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "line 4: op id 1 already used on line 1") {
		t.Fatalf("Read: %v", err)
	}
	_, err := history.NewReader(strings.NewReader("{\"id\":\n")).Next()
	if err == nil || !strings.HasPrefix(err.Error(), "history: line 1:") {
		t.Fatalf("Next on bad JSON: %v", err)
	}
}

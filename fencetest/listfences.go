package fencetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/fence-lock/fence"
)

// testListFences checks fence.FenceLister: every resource with a token
// issued is listed with its last token and last fence, held or not, in
// byte order, paged by after and limit, filtered by prefix; a resource
// never granted is not.
func testListFences(t *testing.T, open func(t *testing.T) Backend) {
	b := open(t)
	l, ok := b.(fence.FenceLister)
	if !ok {
		t.Skipf("%T does not list fences", b)
	}
	ctx := t.Context()
	if got, more, err := l.ListFences(ctx, "", "", 10, nil); err != nil || len(got) != 0 || more {
		t.Fatalf("ListFences of an empty backend = %v, %v, %v; want none", got, more, err)
	}
	// b/2 is granted twice and released: listed with its last fence 2
	// though nothing holds it. a is granted 3 times and written with the
	// second token: last token 3, last fence 3 (each grant raises it).
	var want []fence.FenceStatus
	for i := range 23 {
		name := fmt.Sprintf("r/%02d", i)
		tok := grantN(t, b, name, "A", 1+i%3)
		want = append(want, fence.FenceStatus{Resource: name, LastToken: tok, LastFence: tok})
	}
	tok := grantN(t, b, "b/2", "A", 2)
	if _, err := b.End(ctx, "b/2", tok); err != nil {
		t.Fatalf("End: %v", err)
	}
	want = append(want, fence.FenceStatus{Resource: "b/2", LastToken: tok, LastFence: tok})
	slices.SortFunc(want, func(x, y fence.FenceStatus) int {
		if x.Resource < y.Resource {
			return -1
		}
		return 1
	})

	// Pages over everything: 24 resources, in order, none twice (pages
	// of 2 are smaller than a backend may hold in memory while it reads).
	for _, size := range []int{5, 2} {
		var got []fence.FenceStatus
		after := ""
		for pages := 0; ; pages++ {
			page, more, err := l.ListFences(ctx, "", after, size, nil)
			if err != nil {
				t.Fatalf("ListFences(after %q): %v", after, err)
			}
			if len(page) > size || more && len(page) != size {
				t.Fatalf("ListFences(after %q, %d) = %d resources, more=%v", after, size, len(page), more)
			}
			got = append(got, page...)
			if !more {
				break
			}
			after = page[len(page)-1].Resource
			if pages > 24 {
				t.Fatal("ListFences pages without end")
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("ListFences, all pages of %d:\n got %v\nwant %v", size, got, want)
		}
	}
	page, more, err := l.ListFences(ctx, "r/1", "r/12", 100, nil)
	if err != nil || more || !slices.Equal(page, want[14:21]) {
		t.Fatalf("ListFences(prefix r/1, after r/12) = %v, %v, %v; want %v", page, more, err, want[14:21])
	}
	page, more, err = l.ListFences(ctx, "b/", "", 1, nil)
	if err != nil || more || !slices.Equal(page, want[:1]) {
		t.Fatalf("ListFences(prefix b/, limit 1) = %v, %v, %v; want %v", page, more, err, want[:1])
	}
	// keep filters in the scan: a page is full of what it accepts.
	odd := func(name string) bool { return name[len(name)-1]%2 == 1 }
	page, more, err = l.ListFences(ctx, "r/", "", 3, odd)
	if err != nil || !more || len(page) != 3 || page[0].Resource != "r/01" || page[1].Resource != "r/03" || page[2].Resource != "r/05" {
		t.Fatalf("ListFences(prefix r/, limit 3, odd names) = %v, %v, %v; want r/01, r/03, r/05 and more", page, more, err)
	}
	if page, more, err = l.ListFences(ctx, "", "", 3, func(string) bool { return false }); err != nil || len(page) != 0 || more {
		t.Fatalf("ListFences keeping nothing = %v, %v, %v; want none", page, more, err)
	}
	for _, limit := range []int{0, -1, fence.MaxListLimit + 1} {
		if _, _, err := l.ListFences(ctx, "", "", limit, nil); !errors.Is(err, fence.ErrBadRequest) {
			t.Fatalf("ListFences(limit %d) = %v, want ErrBadRequest", limit, err)
		}
	}
}

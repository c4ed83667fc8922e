package s3_test

import (
	"testing"

	s3guard "github.com/fence-lock/fence/guard/s3"
)

func TestParseLocation(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want s3guard.Location
	}{
		{"s3://my-bucket", s3guard.Location{Bucket: "my-bucket"}},
		{"s3://my-bucket/", s3guard.Location{Bucket: "my-bucket"}},
		{"s3://my-bucket/app/locks", s3guard.Location{Bucket: "my-bucket", Prefix: "app/locks/"}},
		{"s3://b.c-d/p/?endpoint=http://127.0.0.1:8333", s3guard.Location{Bucket: "b.c-d", Prefix: "p/", Endpoint: "http://127.0.0.1:8333"}},
		{"s3://bkt?endpoint=https://s3.example.com/&region=eu-west-1", s3guard.Location{Bucket: "bkt", Endpoint: "https://s3.example.com", Region: "eu-west-1"}},
	} {
		got, err := s3guard.ParseLocation(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseLocation(%q)=%+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if again, err := s3guard.ParseLocation(got.String()); err != nil || again != got {
			t.Errorf("ParseLocation(%q.String() = %q)=%+v, %v; want it again", tc.in, got.String(), again, err)
		}
	}
	for _, bad := range []string{
		"", "my-bucket", "http://my-bucket", "s3:my-bucket", "s3://", "s3://ab", "s3://My-Bucket", "s3://-bucket", "s3://bucket-",
		"s3://bu_cket", "s3://user@bucket", "s3://bucket:80", "s3://bucket#x", "s3://bucket/a//b",
		"s3://bucket?endpoint=ftp://h", "s3://bucket?endpoint=http://", "s3://bucket?endpoint=http://h/path", "s3://bucket?endpoint=http://u@h",
		"s3://bucket?region=", "s3://bucket?region=EU", "s3://bucket?color=red", "s3://bucket?region=a&region=b",
	} {
		if l, err := s3guard.ParseLocation(bad); err == nil {
			t.Errorf("ParseLocation(%q)=%+v, want an error", bad, l)
		}
	}
}

// FuzzParseLocation: no input panics, and a location parsed prints as a
// string that parses back to it.
func FuzzParseLocation(f *testing.F) {
	for _, s := range []string{"s3://my-bucket/app/?endpoint=http://127.0.0.1:8333&region=us-east-1", "s3://b.c/%2F", "s3://bkt?endpoint=https://[::1]:9000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := s3guard.ParseLocation(s)
		if err != nil {
			return
		}
		again, err := s3guard.ParseLocation(l.String())
		if err != nil || again != l {
			t.Fatalf("ParseLocation(%q)=%+v prints %q, which parses to %+v, %v", s, l, l.String(), again, err)
		}
	})
}

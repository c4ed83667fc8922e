package s3

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fence-lock/fence/guard/object"
)

// DefaultRegion is the region of a Location that names none, and whose
// environment names none (AWS_REGION).
const DefaultRegion = "us-east-1"

// Location is where a guard keeps its objects, as a command line names it:
// s3://BUCKET[/PREFIX][?endpoint=URL][&region=REGION]. Without an endpoint
// it is AWS S3 itself (virtual-hosted-style addressing); with one, an
// S3-compatible server addressed path-style (http://host:port/BUCKET/KEY).
type Location struct {
	Bucket   string
	Prefix   string // the key prefix: "" or ending in "/"
	Endpoint string // "" for AWS S3
	Region   string // "" for AWS_REGION, else DefaultRegion
}

// ParseLocation parses s3://BUCKET[/PREFIX][?endpoint=URL][&region=REGION].
// A prefix is given "/" at its end if it lacks one. It returns an error for
// anything else: another scheme, a bad bucket name, an endpoint that is not
// an http or https URL, a parameter it does not know.
func ParseLocation(s string) (Location, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Location{}, fmt.Errorf("s3: location %q: %w", s, err)
	}
	if u.Scheme != "s3" || u.Opaque != "" {
		return Location{}, fmt.Errorf("s3: location %q: want s3://BUCKET[/PREFIX][?endpoint=URL][&region=REGION]", s)
	}
	if u.User != nil || u.Fragment != "" || u.Port() != "" {
		return Location{}, fmt.Errorf("s3: location %q: no user, port or fragment: the bucket is the host", s)
	}
	l := Location{Bucket: u.Host, Prefix: strings.TrimPrefix(u.Path, "/")}
	if err := validateBucket(l.Bucket); err != nil {
		return Location{}, fmt.Errorf("s3: location %q: %w", s, err)
	}
	if l.Prefix != "" && !strings.HasSuffix(l.Prefix, "/") {
		l.Prefix += "/"
	}
	if strings.Contains(l.Prefix, "//") {
		return Location{}, fmt.Errorf("s3: location %q: the prefix has an empty segment", s)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Location{}, fmt.Errorf("s3: location %q: %w", s, err)
	}
	for k, vs := range q {
		if len(vs) != 1 {
			return Location{}, fmt.Errorf("s3: location %q: %s given %d times", s, k, len(vs))
		}
		switch k {
		case "endpoint":
			e, err := url.Parse(vs[0])
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil || (e.Path != "" && e.Path != "/") || e.RawQuery != "" {
				return Location{}, fmt.Errorf("s3: location %q: endpoint %q is not an http:// or https:// URL of a host", s, vs[0])
			}
			l.Endpoint = strings.TrimSuffix(vs[0], "/")
		case "region":
			if vs[0] == "" || strings.ContainsFunc(vs[0], func(r rune) bool { return !(r == '-' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') }) {
				return Location{}, fmt.Errorf("s3: location %q: region %q is not a region name", s, vs[0])
			}
			l.Region = vs[0]
		default:
			return Location{}, fmt.Errorf("s3: location %q: unknown parameter %q (want endpoint, region)", s, k)
		}
	}
	return l, nil
}

// validateBucket checks a bucket name as S3 does: 3 to 63 lowercase
// letters, digits, dots and hyphens, beginning and ending with a letter or
// a digit.
func validateBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket %q: want 3 to 63 characters", b)
	}
	for i, r := range b {
		alnum := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		if !alnum && r != '.' && r != '-' || !alnum && (i == 0 || i == len(b)-1) {
			return fmt.Errorf("bucket %q: want lowercase letters, digits, dots and hyphens, beginning and ending with a letter or a digit", b)
		}
	}
	return nil
}

// String returns l as ParseLocation takes it, readable: the endpoint's
// ":" and "/" are not escaped.
func (l Location) String() string {
	var b strings.Builder
	b.WriteString("s3://" + l.Bucket)
	if l.Prefix != "" {
		b.WriteString((&url.URL{Path: "/" + l.Prefix}).EscapedPath())
	}
	sep := "?"
	for _, p := range [][2]string{{"endpoint", l.Endpoint}, {"region", l.Region}} {
		if p[1] != "" {
			v := strings.NewReplacer("%3A", ":", "%2F", "/").Replace(url.QueryEscape(p[1]))
			b.WriteString(sep + p[0] + "=" + v)
			sep = "&"
		}
	}
	return b.String()
}

// Client returns an S3 client of l's endpoint, with the credentials of the
// environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN if set, anonymous requests otherwise (which an
// S3-compatible server without identities takes). The region is l's, or
// AWS_REGION, or DefaultRegion.
func (l Location) Client() *s3.Client {
	o := s3.Options{Region: l.Region}
	if o.Region == "" {
		o.Region = os.Getenv("AWS_REGION")
	}
	if o.Region == "" {
		o.Region = DefaultRegion
	}
	if l.Endpoint != "" {
		o.BaseEndpoint, o.UsePathStyle = aws.String(l.Endpoint), true
	}
	if id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY"); id != "" && secret != "" {
		creds := aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN"), Source: "environment"}
		o.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil })
	} else {
		o.Credentials = aws.AnonymousCredentials{}
	}
	return s3.New(o)
}

// Guard returns a guard of l: its bucket and prefix, through l.Client().
func (l Location) Guard() *object.Guard {
	g := NewGuard(l.Client(), l.Bucket)
	g.Prefix = l.Prefix
	return g
}

package embedded

import (
	"net/http"
	"os"
	"testing"
)

func TestStartRemovesItsDirectory(t *testing.T) {
	srv, err := Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("readyz: %s", resp.Status)
	}
	if _, err := os.Stat(srv.dir); err != nil {
		t.Fatalf("the data directory: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(srv.dir); !os.IsNotExist(err) {
		t.Errorf("the data directory %s still exists after Close (%v)", srv.dir, err)
	}
}

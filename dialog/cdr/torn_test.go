package cdr

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sipedge/sipedge/internal/testtier"
)

// tornChildEnv names the CDR file TestWriterTornLineAfterIOError's child
// process writes.
const tornChildEnv = "SIPEDGE_CDR_TORN_LINE_CHILD"

// TestWriterTornLineAfterIOError: a flush cut short by the disk filling up
// leaves part of a line in the file; once there is room again, the next
// record still gets a line of its own, and the one record lost is the one
// that was cut. The disk fills up for real: the child process runs under
// a file size limit (RLIMIT_FSIZE), which makes the kernel write what fits
// and refuse the rest (EFBIG), as a full disk does with ENOSPC.
func TestWriterTornLineAfterIOError(t *testing.T) {
	testtier.RequiresWallClock(t)
	if path := os.Getenv(tornChildEnv); path != "" {
		tornLineChild(t, path)
		return
	}
	path := filepath.Join(t.TempDir(), "cdr.jsonl")
	cmd := exec.Command(os.Args[0], "-test.run=^TestWriterTornLineAfterIOError$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), tornChildEnv+"="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i, l := range lines {
		if n := strings.Count(l, `{"a_call_id":`); n > 1 {
			t.Fatalf("line %d holds %d records: %.200q", i+1, n, l)
		}
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last["a_call_id"] != "after" {
		t.Fatalf("the record written once the disk had room again is not a line of its own: %v\n%.300q", err, lines[len(lines)-1])
	}
}

func tornLineChild(t *testing.T, path string) {
	signal.Ignore(syscall.SIGXFSZ) // the limit's signal: the write's EFBIG is what matters
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	full := lim
	full.Cur = 1000 // bytes: the disk is full at 1000
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &full); err != nil {
		t.Fatal(err)
	}
	tw := newTestWriter(t, Options{Path: path, MaxSize: -1}, hooks{})
	for _, id := range ids(0, 4) {
		r := record(id)
		r.Caller = strings.Repeat("1", 400) // about 600 bytes a line: the second is cut at 1000
		tw.Write(r)
	}
	testtier.Eventually(t, 5*time.Second, "the writer to take every record", func() bool { return len(tw.queue) == 0 })
	if err := tw.Reopen(); err != nil { // flushes, into the limit
		t.Fatal(err)
	}
	if tw.metric(t, metricWriteErrors) == "0" {
		t.Fatal("no write error at the file size limit")
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil { // room again
		t.Fatal(err)
	}
	tw.Write(record("after"))
	if err := tw.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Every record is counted once; the one cut short is lost, "after" is not.
	written, _ := strconv.Atoi(tw.metric(t, metricWritten))
	lost, _ := strconv.Atoi(tw.metric(t, metricWriteErrors))
	if written+lost != 5 || written == 0 || lost == 0 {
		t.Fatalf("written %d, write errors %d: want 5 records, some of each", written, lost)
	}
}

package cdr

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/sipedge/sipedge/internal/testtier"
)

// syncBuffer is a log destination safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the JSON log lines with the given message.
func (s *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

type testWriter struct {
	*Writer
	path string
	set  *metrics.Set
	log  *syncBuffer
}

func newTestWriter(t *testing.T, opts Options, h hooks) *testWriter {
	t.Helper()
	if opts.Path == "" {
		opts.Path = filepath.Join(t.TempDir(), "cdr.jsonl")
	}
	tw := &testWriter{path: opts.Path, set: metrics.NewSet(), log: &syncBuffer{}}
	opts.Metrics = tw.set
	opts.Log = slog.New(slog.NewJSONHandler(tw.log, nil))
	w, err := newWriter(opts, h)
	if err != nil {
		t.Fatal(err)
	}
	tw.Writer = w
	t.Cleanup(func() { w.Close(context.Background()) })
	return tw
}

// metric returns the value of a metric of the set.
func (tw *testWriter) metric(t *testing.T, name string) string {
	t.Helper()
	var b bytes.Buffer
	tw.set.WritePrometheus(&b)
	for _, l := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	t.Fatalf("metric %s not found in\n%s", name, b.String())
	return ""
}

func (tw *testWriter) wantMetric(t *testing.T, name, want string) {
	t.Helper()
	if got := tw.metric(t, name); got != want {
		t.Fatalf("%s = %s, want %s", name, got, want)
	}
}

func record(id string) *Record {
	r := AcquireRecord()
	r.ACallID = id
	r.TimeInvite = t0
	r.FinalCode = 200
	return r
}

// readIDs returns the a_call_id of every line of a file, checking that each
// line is a JSON object.
func readIDs(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		_, m := decode(t, sc.Bytes())
		ids = append(ids, m["a_call_id"].(string))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func ids(from, to int) []string {
	var s []string
	for i := from; i < to; i++ {
		s = append(s, fmt.Sprintf("call-%03d", i))
	}
	return s
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

func TestWriterWritesLines(t *testing.T) {
	tw := newTestWriter(t, Options{}, hooks{})
	for _, id := range ids(0, 100) {
		if !tw.Write(record(id)) {
			t.Fatal("Write refused a record with an empty queue")
		}
	}
	if err := tw.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	equal(t, "file", readIDs(t, tw.path), ids(0, 100))
	tw.wantMetric(t, metricWritten, "100")
	tw.wantMetric(t, metricDropped, "0")
	tw.wantMetric(t, metricWriteErrors, "0")
	tw.wantMetric(t, metricQueue, "0")
	if st, err := os.Stat(tw.path); err != nil || st.Mode().Perm() != fileMode {
		t.Fatalf("file mode: %v %v", st.Mode(), err)
	}
}

func TestWriterAppendsToExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cdr.jsonl")
	line := append(record("old").AppendJSON(nil), '\n')
	if err := os.WriteFile(path, line, 0o600); err != nil {
		t.Fatal(err)
	}
	tw := newTestWriter(t, Options{Path: path}, hooks{})
	tw.Write(record("new"))
	tw.Close(context.Background())
	equal(t, "file", readIDs(t, path), []string{"old", "new"})
}

func TestWriterFlushesWithin100ms(t *testing.T) {
	testtier.RequiresWallClock(t)
	tw := newTestWriter(t, Options{}, hooks{})
	start := time.Now()
	tw.Write(record("call-000"))
	testtier.Eventually(t, 5*time.Second, "the line to reach the file", func() bool {
		b, _ := os.ReadFile(tw.path)
		return bytes.HasSuffix(b, []byte("}\n"))
	})
	if d := time.Since(start); d > time.Second {
		t.Fatalf("flushed after %v", d)
	}
	tw.wantMetric(t, metricWritten, "1")
}

// The writer goroutine is not woken per record, which would cost the
// shard a goroutine switch per call: a lone record waits for the tick,
// while a quarter-full queue wakes it at once. Both are told apart from
// the tick by time, so a round the machine slowed past half the flush
// interval proves nothing and is tried again.
func TestWriterWakesPerBatch(t *testing.T) {
	for round := 1; ; round++ {
		tw := newTestWriter(t, Options{Queue: 8}, hooks{})
		start := time.Now()
		tw.Write(record("call-000"))
		time.Sleep(flushInterval / 5)
		lone := len(tw.queue)
		tw.Write(record("call-001")) // 2 of 8: a quarter
		for len(tw.queue) > 0 && time.Since(start) < flushInterval/2 {
			time.Sleep(time.Millisecond)
		}
		drained := len(tw.queue) == 0
		if time.Since(start) >= flushInterval/2 {
			if round == 10 {
				t.Fatal("10 rounds slower than half the flush interval")
			}
			continue
		}
		if lone != 1 {
			t.Fatal("the writer took a lone record before the tick: it is woken per record")
		}
		if !drained {
			t.Fatal("a quarter-full queue did not wake the writer")
		}
		return
	}
}

func TestWriterRotation(t *testing.T) {
	lineLen := len(record("call-000").AppendJSON(nil)) + 1
	tw := newTestWriter(t, Options{MaxSize: int64(3 * lineLen), MaxBackups: 2}, hooks{})
	for _, id := range ids(0, 10) {
		tw.Write(record(id))
	}
	if err := tw.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Files of 3 lines: [0-2] [3-5] [6-8] [9]. Two backups survive.
	equal(t, "cdr.jsonl", readIDs(t, tw.path), ids(9, 10))
	equal(t, "cdr.jsonl.1", readIDs(t, tw.path+".1"), ids(6, 9))
	equal(t, "cdr.jsonl.2", readIDs(t, tw.path+".2"), ids(3, 6))
	if _, err := os.Stat(tw.path + ".3"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cdr.jsonl.3 exists (%v): the oldest was not deleted", err)
	}
	for _, p := range []string{tw.path, tw.path + ".1", tw.path + ".2"} {
		if st, _ := os.Stat(p); st.Size() > int64(3*lineLen) {
			t.Fatalf("%s has %d bytes, more than MaxSize %d", p, st.Size(), 3*lineLen)
		}
	}
	tw.wantMetric(t, metricRotations, "3")
	tw.wantMetric(t, metricWritten, "10")
}

func TestWriterRotationLongLine(t *testing.T) {
	tw := newTestWriter(t, Options{MaxSize: 10, MaxBackups: 3}, hooks{})
	for _, id := range ids(0, 3) {
		tw.Write(record(id))
	}
	tw.Close(context.Background())
	// Each line is longer than MaxSize: one a file, none lost.
	equal(t, "cdr.jsonl", readIDs(t, tw.path), ids(2, 3))
	equal(t, "cdr.jsonl.1", readIDs(t, tw.path+".1"), ids(1, 2))
	equal(t, "cdr.jsonl.2", readIDs(t, tw.path+".2"), ids(0, 1))
}

func TestWriterNoRotation(t *testing.T) {
	tw := newTestWriter(t, Options{MaxSize: -1}, hooks{})
	for _, id := range ids(0, 50) {
		tw.Write(record(id))
	}
	tw.Close(context.Background())
	equal(t, "cdr.jsonl", readIDs(t, tw.path), ids(0, 50))
}

func TestWriterReopen(t *testing.T) {
	testtier.RequiresWallClock(t)
	tw := newTestWriter(t, Options{}, hooks{})
	tw.Write(record("call-000"))
	testtier.Eventually(t, 5*time.Second, "the first record to be flushed", func() bool { return tw.metric(t, metricWritten) == "1" })

	// logrotate moves the file; the writer still holds the old one.
	moved := tw.path + ".moved"
	if err := os.Rename(tw.path, moved); err != nil {
		t.Fatal(err)
	}
	tw.Write(record("call-001")) // in the old file or the new one: queued before Reopen
	testtier.Eventually(t, 5*time.Second, "the second record to be flushed", func() bool { return tw.metric(t, metricWritten) == "2" })
	if err := tw.Reopen(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tw.path); err != nil {
		t.Fatalf("Reopen did not create a new file: %v", err)
	}
	tw.Write(record("call-002"))
	if err := tw.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	equal(t, "moved file", readIDs(t, moved), ids(0, 2))
	equal(t, "new file", readIDs(t, tw.path), ids(2, 3))
	if err := tw.Reopen(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reopen after Close: %v, want ErrClosed", err)
	}
}

// blocker pauses the writer goroutine inside hooks.beforeRecord.
type blocker struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlocker() *blocker {
	return &blocker{entered: make(chan struct{}, 1000), release: make(chan struct{})}
}

func (b *blocker) hook() {
	b.entered <- struct{}{}
	<-b.release
}

func (b *blocker) unblock() { b.once.Do(func() { close(b.release) }) }

func TestWriterQueueFullDoesNotBlock(t *testing.T) {
	testtier.RequiresWallClock(t)
	b := newBlocker()
	tw := newTestWriter(t, Options{Queue: 2}, hooks{beforeRecord: b.hook})
	defer b.unblock()

	if !tw.Write(record("call-000")) {
		t.Fatal("first Write refused")
	}
	<-b.entered // the writer holds call-000 and is stuck on the sink
	for _, id := range ids(1, 3) {
		if !tw.Write(record(id)) {
			t.Fatalf("Write of %s refused with room in the queue", id)
		}
	}
	tw.wantMetric(t, metricQueue, "2")

	// The queue is full: Write returns false at once, many times over.
	const drops = 1000
	start := time.Now()
	for i := range drops {
		if tw.Write(record(fmt.Sprintf("drop-%d", i))) {
			t.Fatal("Write accepted a record with a full queue")
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("%d refused Writes took %v", drops, d)
	}
	tw.wantMetric(t, metricDropped, fmt.Sprint(drops))

	// Logged at once, with the count, and not once per drop.
	testtier.Eventually(t, 5*time.Second, "the drop log line", func() bool { return len(tw.log.lines(t, "cdr queue full, records dropped")) > 0 })
	if n := len(tw.log.lines(t, "cdr queue full, records dropped")); n > 2 {
		t.Fatalf("%d log lines for a burst of drops, want at most 2 in the first second", n)
	}

	b.unblock()
	if err := tw.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	equal(t, "file", readIDs(t, tw.path), ids(0, 3))
	tw.wantMetric(t, metricWritten, "3")
	var logged float64
	for _, l := range tw.log.lines(t, "cdr queue full, records dropped") {
		logged += l["dropped"].(float64)
	}
	if logged != drops {
		t.Fatalf("log lines count %v drops, want %d", logged, drops)
	}

	// After Close: refused, counted, logged once.
	for range 3 {
		if tw.Write(record("late")) {
			t.Fatal("Write after Close accepted a record")
		}
	}
	tw.wantMetric(t, metricDropped, fmt.Sprint(drops+3))
	if n := len(tw.log.lines(t, "cdr record written after Close, dropped")); n != 1 {
		t.Fatalf("%d log lines for Writes after Close, want 1", n)
	}
}

func TestWriterDropLogRateLimited(t *testing.T) {
	testtier.RequiresWallClock(t)
	b := newBlocker()
	tw := newTestWriter(t, Options{Queue: 1}, hooks{beforeRecord: b.hook})
	defer b.unblock()
	tw.Write(record("held"))
	<-b.entered
	tw.Write(record("queued"))
	// Drops spread over 1.5 s: the first logged at once, the rest batched
	// into one more line a second later.
	deadline := time.Now().Add(1500 * time.Millisecond)
	n := 0
	for time.Now().Before(deadline) {
		tw.Write(record("drop"))
		n++
		time.Sleep(5 * time.Millisecond)
	}
	testtier.Eventually(t, 5*time.Second, "two drop lines", func() bool { return len(tw.log.lines(t, "cdr queue full, records dropped")) >= 2 })
	lines := tw.log.lines(t, "cdr queue full, records dropped")
	if len(lines) != 2 {
		t.Fatalf("%d drop log lines in 1.5 s, want 2", len(lines))
	}
	b.unblock()
	tw.Close(context.Background())
	var logged float64
	for _, l := range tw.log.lines(t, "cdr queue full, records dropped") {
		logged += l["dropped"].(float64)
	}
	if int(logged) != n {
		t.Fatalf("logged %v drops, made %d", logged, n)
	}
}

func TestWriterCloseFlushesQueued(t *testing.T) {
	b := newBlocker()
	tw := newTestWriter(t, Options{Queue: 1000}, hooks{beforeRecord: func() {
		select {
		case <-b.release:
		default:
			b.hook()
		}
	}})
	defer b.unblock()
	for _, id := range ids(0, 500) {
		if !tw.Write(record(id)) {
			t.Fatal("Write refused")
		}
	}
	<-b.entered // 499 queued behind a stuck writer

	// Close waits for them; a short deadline gives up without losing any.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := tw.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a stuck writer: %v, want DeadlineExceeded", err)
	}
	if tw.Write(record("late")) {
		t.Fatal("Write accepted a record after Close")
	}
	b.unblock()
	if err := tw.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	equal(t, "file", readIDs(t, tw.path), ids(0, 500))
	tw.wantMetric(t, metricWritten, "500")
	tw.wantMetric(t, metricDropped, "1")
}

// TestWriterConcurrent races Writes from many goroutines against Reopen and
// Close: every record is written or dropped, never lost or duplicated.
func TestWriterConcurrent(t *testing.T) {
	tw := newTestWriter(t, Options{Queue: 64, MaxSize: 4096, MaxBackups: 1000}, hooks{})
	const writers, each = 8, 500
	var wg sync.WaitGroup
	accepted := make([][]string, writers)
	var tried atomic.Int64
	start := make(chan struct{})
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range each {
				id := fmt.Sprintf("g%d-%d", g, i)
				if tw.Write(record(id)) {
					accepted[g] = append(accepted[g], id)
				}
				tried.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		for range 20 {
			if err := tw.Reopen(); err != nil && !errors.Is(err, ErrClosed) {
				t.Error(err)
			}
		}
	}()
	close(start)
	for tried.Load() < writers*each/4 { // Close races the rest
		runtime.Gosched()
	}
	if err := tw.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	want := map[string]bool{}
	for _, a := range accepted {
		for _, id := range a {
			want[id] = true
		}
	}
	got := map[string]bool{}
	files, _ := filepath.Glob(tw.path + "*")
	for _, p := range files {
		for _, id := range readIDs(t, p) {
			if got[id] {
				t.Fatalf("%s written twice", id)
			}
			got[id] = true
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d records in the files, %d accepted", len(got), len(want))
	}
	for id := range want {
		if !got[id] {
			t.Fatalf("accepted %s is missing", id)
		}
	}
	tw.wantMetric(t, metricWritten, fmt.Sprint(len(want)))
	tw.wantMetric(t, metricDropped, fmt.Sprint(writers*each-len(want)))
}

func TestWriterIOError(t *testing.T) {
	testtier.RequiresWallClock(t)
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	tw := newTestWriter(t, Options{Path: "/dev/full", MaxSize: -1}, hooks{})
	for _, id := range ids(0, 5) {
		if !tw.Write(record(id)) {
			t.Fatal("Write refused")
		}
	}
	testtier.Eventually(t, 5*time.Second, "write errors", func() bool { return tw.metric(t, metricWriteErrors) == "5" })
	testtier.Eventually(t, 5*time.Second, "the error log line", func() bool { return len(tw.log.lines(t, "cdr write failed")) > 0 })
	tw.Write(record("call-005")) // the file is reopened for the next record
	err := tw.Close(context.Background())
	if err == nil {
		t.Fatal("Close after a failing flush returned nil")
	}
	tw.wantMetric(t, metricWriteErrors, "6")
	tw.wantMetric(t, metricWritten, "0")
	var lost float64
	for _, l := range tw.log.lines(t, "cdr write failed") {
		lost += l["records_lost"].(float64)
	}
	if lost != 6 {
		t.Fatalf("log lines count %v lost records, want 6", lost)
	}
}

func TestWriterCDRFieldsShadowedCounted(t *testing.T) {
	tw := newTestWriter(t, Options{}, hooks{})
	r := record("call-000")
	r.CDRFields = map[string]string{"final_code": "1", "trunk": "x", "account": "42"}
	tw.Write(r)
	tw.Close(context.Background())
	tw.wantMetric(t, metricShadowed, "2")
}

func TestNewOptions(t *testing.T) {
	dir := t.TempDir()
	for _, opts := range []Options{
		{},
		{Path: filepath.Join(dir, "x"), Queue: -1},
		{Path: filepath.Join(dir, "x"), MaxBackups: -1},
	} {
		if _, err := New(opts); !errors.Is(err, errInvalidOption) {
			t.Errorf("New(%+v): %v, want errInvalidOption", opts, err)
		}
	}
	if _, err := New(Options{Path: filepath.Join(dir, "missing", "cdr.jsonl")}); err == nil || !strings.Contains(err.Error(), "cannot open CDR file") {
		t.Errorf("New with a missing directory: %v", err)
	}

	set := metrics.NewSet()
	w, err := New(Options{Path: filepath.Join(dir, "cdr.jsonl"), Metrics: set})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	if cap(w.queue) != DefaultQueue || w.sink.maxSize != DefaultMaxSize || w.sink.maxBackups != DefaultMaxBackups {
		t.Errorf("defaults: queue %d, max size %d, backups %d", cap(w.queue), w.sink.maxSize, w.sink.maxBackups)
	}
	if _, err := New(Options{Path: filepath.Join(dir, "other.jsonl"), Metrics: set}); !errors.Is(err, ErrMetricsInUse) {
		t.Errorf("second Writer on one set: %v, want ErrMetricsInUse", err)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Fault switches: files in <state-dir>/faults/ that tests create and remove to emulate node failures.
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// errNodeUnreachable is what every API request fails with while not-ready is on.
var errNodeUnreachable = errors.New("nodeshim fault not-ready: control plane unreachable from this node")

type faults struct {
	dir       string
	notReady  atomic.Bool
	pullError atomic.Bool
	slowStart atomic.Int64 // nanoseconds
	execCut   atomic.Int64 // bytes; -1 when off

	mu      sync.Mutex
	bodies  map[*faultBody]struct{} // open API response bodies, cut when not-ready starts
	changes chan struct{}           // closed (and replaced) on every switch change
}

func newFaults(dir string) *faults {
	f := &faults{dir: dir, bodies: map[*faultBody]struct{}{}, changes: make(chan struct{})}
	f.execCut.Store(-1)
	f.slowStart.Store(-1)
	f.poll()
	return f
}

// run polls the switch files every 100ms.
func (f *faults) run(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.poll()
		}
	}
}

func (f *faults) changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changes
}

func (f *faults) poll() {
	changed := false
	flag := func(name string, v *atomic.Bool) {
		_, err := os.Stat(filepath.Join(f.dir, name))
		on := err == nil
		if v.Swap(on) != on {
			klog.Infof("fault %s: %s", name, onOff(on))
			changed = true
		}
	}
	number := func(name string, v *atomic.Int64, scale float64) {
		val := int64(-1)
		if b, err := os.ReadFile(filepath.Join(f.dir, name)); err == nil {
			if x, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil && x >= 0 {
				val = int64(x * scale)
			}
		}
		if v.Swap(val) != val {
			klog.Infof("fault %s: %s", name, strings.TrimSpace(onOff(val >= 0)+" "+numberText(val, scale)))
			changed = true
		}
	}
	wasDown := f.notReady.Load()
	flag("not-ready", &f.notReady)
	flag("pull-error", &f.pullError)
	number("slow-start", &f.slowStart, float64(time.Second))
	number("exec-cut", &f.execCut, 1)
	if !wasDown && f.notReady.Load() {
		f.cutBodies()
	}
	if changed {
		f.mu.Lock()
		close(f.changes)
		f.changes = make(chan struct{})
		f.mu.Unlock()
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func numberText(v int64, scale float64) string {
	if v < 0 {
		return ""
	}
	return strconv.FormatFloat(float64(v)/scale, 'f', -1, 64)
}

// slowStartDelay is how much later containers start; 0 when off.
func (f *faults) slowStartDelay() time.Duration {
	return time.Duration(max(f.slowStart.Load(), 0))
}

// wrapTransport makes the API client fail every request while not-ready is on, sending nothing.
func (f *faults) wrapTransport(rt http.RoundTripper) http.RoundTripper {
	return &faultTransport{rt: rt, f: f}
}

type faultTransport struct {
	rt http.RoundTripper
	f  *faults
}

func (t *faultTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.f.notReady.Load() {
		return nil, errNodeUnreachable
	}
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b := &faultBody{ReadCloser: resp.Body, f: t.f}
	t.f.mu.Lock()
	t.f.bodies[b] = struct{}{}
	t.f.mu.Unlock()
	resp.Body = b
	return resp, nil
}

// cutBodies ends open responses (informer watches above all): an unreachable node hears nothing.
func (f *faults) cutBodies() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for b := range f.bodies {
		_ = b.ReadCloser.Close()
	}
}

type faultBody struct {
	io.ReadCloser
	f *faults
}

func (b *faultBody) Read(p []byte) (int, error) {
	if b.f.notReady.Load() {
		return 0, errNodeUnreachable
	}
	return b.ReadCloser.Read(p)
}

func (b *faultBody) Close() error {
	b.f.mu.Lock()
	delete(b.f.bodies, b)
	b.f.mu.Unlock()
	return b.ReadCloser.Close()
}

// connKey keys the request context value through which exec reaches its raw connection.
type connKey struct{}

// connHolder keeps the hijacked connection of an exec request so that exec-cut can drop it.
type connHolder struct {
	mu   sync.Mutex
	conn net.Conn
}

// drop closes the TCP connection under TLS without close_notify or a final status: abrupt.
func (h *connHolder) drop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		return
	}
	if tc, ok := h.conn.(*tls.Conn); ok {
		_ = tc.NetConn().Close()
	} else {
		_ = h.conn.Close()
	}
}

// hijackTap records the connection that the streaming upgrade hijacks.
type hijackTap struct {
	http.ResponseWriter
	holder *connHolder
}

func (w *hijackTap) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.holder.mu.Lock()
		w.holder.conn = conn
		w.holder.mu.Unlock()
	}
	return conn, rw, err
}

func (w *hijackTap) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// kubeletHandler applies the faults to the kubelet API: while not-ready is on, a request gets
// its connection closed without an answer, as from a node that is gone.
func (f *faults) kubeletHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.notReady.Load() {
			klog.Infof("kubelet API %s %s: dropped (fault not-ready)", r.Method, r.URL.Path)
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
			} else {
				http.Error(w, "node not ready", http.StatusServiceUnavailable)
			}
			return
		}
		if strings.HasPrefix(r.URL.Path, "/exec/") {
			klog.Infof("kubelet API %s %s: upgrade %q, protocols %q", r.Method, r.URL.Path,
				r.Header.Get("Upgrade"), r.Header.Get("X-Stream-Protocol-Version")+r.Header.Get("Sec-Websocket-Protocol"))
		} else {
			klog.V(2).Infof("kubelet API %s %s", r.Method, r.URL.Path)
		}
		if strings.HasPrefix(r.URL.Path, "/exec/") {
			h := &connHolder{}
			r = r.WithContext(context.WithValue(r.Context(), connKey{}, h))
			w = &hijackTap{ResponseWriter: w, holder: h}
		}
		next.ServeHTTP(w, r)
	})
}

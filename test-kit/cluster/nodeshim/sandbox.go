// Pod sandboxes: the pre-made pod network namespaces, and the few things the shim does inside one.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// sandbox is one pre-made pod network namespace with its addresses.
type sandbox struct {
	netns   string
	ips     []string
	owner   types.UID   // pod holding it; "" when free
	restore []v1.Sysctl // values the owner's sysctls replaced, put back on release
}

func parseSandbox(s string) (*sandbox, error) {
	name, ips, ok := strings.Cut(s, "=")
	if !ok || name == "" || ips == "" {
		return nil, fmt.Errorf("--sandbox %q: want NETNS=IP[,IP6]", s)
	}
	sb := &sandbox{netns: name}
	for _, ip := range strings.Split(ips, ",") {
		if net.ParseIP(ip) == nil {
			return nil, fmt.Errorf("--sandbox %q: %q is not an IP", s, ip)
		}
		sb.ips = append(sb.ips, ip)
	}
	return sb, nil
}

type sandboxPool struct {
	mu   sync.Mutex
	list []*sandbox
}

// acquire gives the pod a free sandbox (the one it already holds, if any); nil when none is free.
func (p *sandboxPool) acquire(uid types.UID) *sandbox {
	p.mu.Lock()
	defer p.mu.Unlock()
	var free *sandbox
	for _, sb := range p.list {
		if sb.owner == uid {
			return sb
		}
		if sb.owner == "" && free == nil {
			free = sb
		}
	}
	if free != nil {
		free.owner = uid
	}
	return free
}

// release frees the pod's sandbox, first undoing its sysctls: a pod network namespace is
// new for every pod under a real CNI.
func (p *sandboxPool) release(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, sb := range p.list {
		if sb.owner == uid {
			if len(sb.restore) > 0 {
				if _, err := applySysctls(sb.netns, sb.restore); err != nil {
					klog.Warningf("sandbox %s: restoring sysctls: %v", sb.netns, err)
				}
				sb.restore = nil
			}
			sb.owner = ""
		}
	}
}

// inNetns runs fn on an OS thread switched into the named network namespace ("" = the
// shim's own). Sockets opened by fn stay in that namespace after the thread switches back.
func inNetns(name string, fn func() error) error {
	if name == "" {
		return fn()
	}
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open(filepath.Join("/run/netns", name))
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("network namespace %q: %w", name, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %q: %w", name, err)
	}
	fnErr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: Go then retires it instead of reusing a thread in the wrong namespace.
		klog.Errorf("cannot switch thread back from netns %q: %v", name, err)
		return fnErr
	}
	runtime.UnlockOSThread()
	return fnErr
}

// applySysctls writes sysctls in a network namespace and returns the values they replaced.
// Only net.* sysctls belong to a network namespace; the others (IPC) are not modeled and
// are skipped.
func applySysctls(netns string, sysctls []v1.Sysctl) ([]v1.Sysctl, error) {
	var old []v1.Sysctl
	if len(sysctls) == 0 {
		return nil, nil
	}
	err := inNetns(netns, func() error {
		for _, s := range sysctls {
			name := s.Name
			if !strings.Contains(name, "/") {
				name = strings.ReplaceAll(name, ".", "/")
			}
			if !strings.HasPrefix(name, "net/") {
				klog.Warningf("sysctl %s: not in the network namespace, not modeled; skipped", s.Name)
				continue
			}
			path := filepath.Join("/proc/sys", name)
			prev, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("sysctl %s: %w", s.Name, err)
			}
			if err := os.WriteFile(path, []byte(s.Value), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s: %w", s.Name, s.Value, err)
			}
			old = append([]v1.Sysctl{{Name: s.Name, Value: strings.TrimSpace(string(prev))}}, old...)
		}
		return nil
	})
	return old, err
}

// PortForward connects to the port on the pod's loopback from inside its sandbox, as the
// kubelet's port-forward does.
func (p *provider) PortForward(ctx context.Context, namespace, pod string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	r := p.get(namespace, pod)
	if r == nil {
		return notFound(namespace, pod)
	}
	var conn net.Conn
	err := inNetns(r.netnsName(), func() error {
		var err error
		for _, host := range []string{"127.0.0.1", "::1"} {
			if conn, err = net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(int(port)))); err == nil {
				return nil
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("port-forward to %s/%s:%d: %w", namespace, pod, port, err)
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

// Container probes (startup, liveness, readiness), run from the node like the kubelet's prober.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probe runs the probes of one running instance until ctx ends. The startup probe gates the
// others; a failed startup or liveness probe kills the instance (the restart policy decides
// what follows); readiness sets ready.
func (r *podRuntime) probe(ctx context.Context, cs *ctrState, proc *process) {
	spec := cs.spec
	if spec.StartupProbe != nil {
		ok := r.probeLoop(ctx, cs, proc, "Startup", spec.StartupProbe, func(success bool) bool {
			if success {
				r.mu.Lock()
				cs.started = true
				cs.ready = spec.ReadinessProbe == nil && cs.kind != initCtr
				r.mu.Unlock()
				r.changed()
			}
			return success // stop once started
		})
		if !ok {
			return
		}
	}
	if spec.LivenessProbe != nil {
		go r.probeLoop(ctx, cs, proc, "Liveness", spec.LivenessProbe, func(bool) bool { return false })
	}
	if spec.ReadinessProbe != nil {
		r.probeLoop(ctx, cs, proc, "Readiness", spec.ReadinessProbe, func(success bool) bool {
			r.mu.Lock()
			changed := cs.ready != success
			cs.ready = success
			r.mu.Unlock()
			if changed {
				r.changed()
			}
			return false
		})
	}
}

// probeLoop probes every periodSeconds. onResult sees each settled result (after
// successThreshold successes or failureThreshold failures) and returns true to stop. A
// failure past the threshold of a startup or liveness probe kills the instance, and the
// loop reports false.
func (r *podRuntime) probeLoop(ctx context.Context, cs *ctrState, proc *process, kind string, pr *v1.Probe, onResult func(bool) bool) bool {
	period := time.Duration(max(pr.PeriodSeconds, 1)) * time.Second
	timeout := time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second
	successes, failures := max(pr.SuccessThreshold, 1), max(pr.FailureThreshold, 1)
	if !sleepCtx(ctx, time.Duration(pr.InitialDelaySeconds)*time.Second) {
		return false
	}
	var okRun, failRun int32
	for {
		err := r.runProbe(ctx, cs, proc, &pr.ProbeHandler, timeout)
		if ctx.Err() != nil {
			return false
		}
		if err == nil {
			okRun, failRun = okRun+1, 0
			if okRun >= successes && onResult(true) {
				return true
			}
		} else {
			okRun, failRun = 0, failRun+1
			r.p.event(r.ref(cs), v1.EventTypeWarning, "Unhealthy", "%s probe failed: %v", kind, err)
			if failRun >= failures {
				if kind != "Readiness" {
					r.mu.Lock()
					grace := min(r.killGrace, ctrGrace(r.pod))
					r.mu.Unlock()
					r.kill(cs, proc, grace, fmt.Sprintf("Container %s failed %s probe, will be restarted", cs.spec.Name, strings.ToLower(kind)))
					return false
				}
				if onResult(false) {
					return true
				}
			}
		}
		if !sleepCtx(ctx, period) {
			return false
		}
	}
}

// ctrGrace is the pod's termination grace period, capped at 5s like deletions.
func ctrGrace(pod *v1.Pod) time.Duration {
	g := int64(30)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	return min(time.Duration(g)*time.Second, 5*time.Second)
}

// runProbe runs one probe; nil is success, the error the kubelet's failure output.
func (r *podRuntime) runProbe(ctx context.Context, cs *ctrState, proc *process, h *v1.ProbeHandler, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r.mu.Lock()
	podIP := ""
	if len(r.podIPs) > 0 {
		podIP = r.podIPs[0]
	}
	r.mu.Unlock()
	switch {
	case h.Exec != nil:
		var out bytes.Buffer
		cmd := r.p.nsenterCmd(ctx, proc, h.Exec.Command)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ctx.Err() == context.DeadlineExceeded {
			return fmt.Errorf("command %q timed out", strings.Join(h.Exec.Command, " "))
		}
		if err != nil {
			return fmt.Errorf("%s", strings.TrimSpace(out.String()+" "+err.Error()))
		}
		return nil
	case h.HTTPGet != nil:
		return httpProbe(ctx, h.HTTPGet, podIP, &cs.spec, timeout)
	case h.TCPSocket != nil:
		host := h.TCPSocket.Host
		if host == "" {
			host = podIP
		}
		return dialProbe(ctx, host, h.TCPSocket.Port, &cs.spec)
	case h.GRPC != nil: // not modeled beyond the port accepting connections
		return dialProbe(ctx, podIP, intstr.FromInt32(h.GRPC.Port), &cs.spec)
	}
	return fmt.Errorf("probe has no handler")
}

func dialProbe(ctx context.Context, host string, port intstr.IntOrString, c *v1.Container) error {
	p, err := resolvePort(port, c)
	if err != nil {
		return err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(p)))
	if err != nil {
		return err
	}
	return conn.Close()
}

func httpProbe(ctx context.Context, hg *v1.HTTPGetAction, podIP string, c *v1.Container, timeout time.Duration) error {
	port, err := resolvePort(hg.Port, c)
	if err != nil {
		return err
	}
	host := hg.Host
	if host == "" {
		host = podIP
	}
	scheme := strings.ToLower(string(hg.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	path, query, _ := strings.Cut(hg.Path, "?")
	u.Path, u.RawQuery = path, query
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/1.36")
	req.Header.Set("Accept", "*/*")
	for _, h := range hg.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
		} else {
			req.Header.Add(h.Name, h.Value)
		}
	}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet does not verify probe targets either
		DisableKeepAlives: true,
		Proxy:             nil,
	}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return nil
}

// resolvePort turns a port number or a named container port into a number.
func resolvePort(port intstr.IntOrString, c *v1.Container) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port %q in container %s", port.StrVal, c.Name)
}

// nsenterCmd runs a command inside a running container: its mount, UTS and network
// namespaces, its root and working directory, its user and group, its environment.
func (p *provider) nsenterCmd(ctx context.Context, proc *process, argv []string) *exec.Cmd {
	args := []string{"--target", strconv.Itoa(proc.pid), "--mount", "--uts", "--net", "--root", "--wd"}
	if proc.uid != 0 || proc.gid != 0 {
		args = append(args, "--setuid", strconv.FormatInt(proc.uid, 10), "--setgid", strconv.FormatInt(proc.gid, 10))
	}
	args = append(append(args, "--"), argv...)
	cmd := exec.CommandContext(ctx, p.nsenter, args...)
	cmd.Env = proc.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

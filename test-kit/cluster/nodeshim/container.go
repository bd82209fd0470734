// One container's life: image "pull", start, wait, restart per policy with the kubelet's back-off.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

type ctrKind int

const (
	regularCtr ctrKind = iota
	initCtr
	sidecarCtr // init container with restartPolicy Always
)

// ctrState is what the node knows of one container; guarded by its podRuntime's mu.
type ctrState struct {
	spec      v1.Container
	kind      ctrKind
	state     v1.ContainerState
	last      v1.ContainerState
	restarts  int32
	started   bool
	ready     bool
	imageID   string
	id        string   // containerID of the latest instance
	proc      *process // the running instance, nil when none
	instances int
}

func newCtrState(c v1.Container, kind ctrKind, waitReason string) *ctrState {
	return &ctrState{spec: c, kind: kind, state: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: waitReason}}}
}

// Back-off between restarts and between pulls. The kubelet's is 10s doubling to a 5m cap;
// the shim uses 1s doubling to 10s so that tests see CrashLoopBackOff and recovery quickly.
const (
	backoffInitial = time.Second
	backoffCap     = 10 * time.Second
)

type backoff struct {
	next time.Duration
	last time.Time
}

// delay is the wait before the next restart: none the first time, like the kubelet, and the
// back-off is forgotten after a quiet period of twice the cap.
func (b *backoff) delay() time.Duration {
	now := time.Now()
	if b.next == 0 || now.Sub(b.last) > 2*backoffCap {
		b.next, b.last = backoffInitial, now
		return 0
	}
	d := b.next
	b.next = min(2*b.next, backoffCap)
	b.last = now.Add(d)
	return d
}

// ref is the object kubelet events about this container point at.
func (r *podRuntime) ref(cs *ctrState) *v1.ObjectReference {
	pod := r.podCopy()
	path := fmt.Sprintf("spec.containers{%s}", cs.spec.Name)
	if cs.kind != regularCtr {
		path = fmt.Sprintf("spec.initContainers{%s}", cs.spec.Name)
	}
	return &v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion, FieldPath: path}
}

func (r *podRuntime) setWaiting(cs *ctrState, reason, msg string) {
	r.mu.Lock()
	cs.state = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: msg}}
	cs.ready, cs.started = false, false
	r.mu.Unlock()
	r.changed()
}

// supervise runs a container, restarting it as its policy says, until it is done for good
// (reporting whether its last run succeeded) or ctx ends.
func (r *podRuntime) supervise(ctx context.Context, cs *ctrState) bool {
	var crash backoff
	pod := r.podCopy()
	podName := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, r.uid)
	for {
		dir, ok := r.pullImage(ctx, cs)
		if !ok {
			return false
		}
		code, ok := r.runOnce(ctx, cs, dir)
		if !ok {
			return false
		}
		if !restarts(pod.Spec.RestartPolicy, cs.kind, code) {
			return code == 0
		}
		if d := crash.delay(); d > 0 {
			r.p.event(r.ref(cs), v1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", cs.spec.Name, podName)
			r.mu.Lock()
			cs.last = cs.state
			r.mu.Unlock()
			r.setWaiting(cs, "CrashLoopBackOff", fmt.Sprintf("back-off %v restarting failed container=%s pod=%s", d, cs.spec.Name, podName))
			if !sleepCtx(ctx, d) {
				return false
			}
		}
		r.mu.Lock()
		if cs.state.Terminated != nil {
			cs.last = cs.state
		}
		cs.restarts++
		r.mu.Unlock()
	}
}

// restarts says whether a container that exited with code runs again.
func restarts(policy v1.RestartPolicy, kind ctrKind, code int) bool {
	switch kind {
	case sidecarCtr:
		return true
	case initCtr:
		return code != 0 && policy != v1.RestartPolicyNever
	}
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

// pullImage "pulls" the container's image: known images are present on the node, others
// (and all images of pods created under the pull-error fault) fail like a registry error.
func (r *podRuntime) pullImage(ctx context.Context, cs *ctrState) (string, bool) {
	image := cs.spec.Image
	delay := backoffInitial
	for {
		dir, err := r.p.imageDir(image, r.pullFault)
		if err == nil {
			r.p.event(r.ref(cs), v1.EventTypeNormal, "Pulled", "Container image %q already present on machine", image)
			r.mu.Lock()
			cs.imageID = imageID(image, dir)
			r.mu.Unlock()
			return dir, true
		}
		msg := fmt.Sprintf("failed to pull and unpack image %q: %v", image, err)
		r.p.event(r.ref(cs), v1.EventTypeWarning, "Failed", "Failed to pull image %q: %s", image, msg)
		r.p.event(r.ref(cs), v1.EventTypeWarning, "Failed", "Error: ErrImagePull")
		r.setWaiting(cs, "ErrImagePull", msg)
		if !sleepCtx(ctx, time.Second) {
			return "", false
		}
		r.p.event(r.ref(cs), v1.EventTypeNormal, "BackOff", "Back-off pulling image %q", image)
		r.p.event(r.ref(cs), v1.EventTypeWarning, "Failed", "Error: ImagePullBackOff")
		r.setWaiting(cs, "ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", image, msg))
		if !sleepCtx(ctx, delay) {
			return "", false
		}
		delay = min(2*delay, backoffCap)
	}
}

// imageDir finds the directory of an image given with --image.
func (p *provider) imageDir(image string, pullFault bool) (string, error) {
	if pullFault {
		return "", fmt.Errorf("failed to resolve reference %q: unexpected status from HEAD request: 503 Service Unavailable (nodeshim fault pull-error)", image)
	}
	want := normalizeImage(image)
	for name, dir := range p.cfg.images {
		if normalizeImage(name) == want {
			return dir, nil
		}
	}
	return "", fmt.Errorf("failed to resolve reference %q: %s: not found", image, image)
}

// normalizeImage makes "busybox", "docker.io/library/busybox:latest" and the like compare equal.
func normalizeImage(image string) string {
	image = strings.TrimPrefix(image, "docker.io/")
	image = strings.TrimPrefix(image, "library/")
	last := image[strings.LastIndex(image, "/")+1:]
	if !strings.Contains(last, ":") && !strings.Contains(last, "@") {
		image += ":latest"
	}
	return image
}

func imageID(image, dir string) string {
	sum := sha256.Sum256([]byte(dir))
	name := image
	if i := strings.LastIndexAny(image, ":@"); i > strings.LastIndex(image, "/") {
		name = image[:i]
	}
	return name + "@sha256:" + hex.EncodeToString(sum[:])
}

// runOnce creates and starts one instance of the container and waits for its end. It
// returns the exit code, and false if the pod is being stopped.
func (r *podRuntime) runOnce(ctx context.Context, cs *ctrState, imageDir string) (int, bool) {
	var ls *launchSpec
	for {
		var err error
		if ls, err = r.launchSpec(ctx, cs, imageDir); err == nil {
			break
		}
		// A bad env reference and the like: not a run, retried until fixed (CreateContainerConfigError).
		r.p.event(r.ref(cs), v1.EventTypeWarning, "Failed", "Error: %v", err)
		r.setWaiting(cs, "CreateContainerConfigError", err.Error())
		if !sleepCtx(ctx, 2*time.Second) {
			return 0, false
		}
	}
	r.p.event(r.ref(cs), v1.EventTypeNormal, "Created", "Container created")
	proc, err := r.p.startProcess(ls)
	if err != nil {
		now := metav1.Now()
		r.mu.Lock()
		cs.state = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: err.Error(), StartedAt: metav1.NewTime(time.Unix(0, 0)), FinishedAt: now}}
		cs.ready, cs.started = false, false
		r.mu.Unlock()
		r.changed()
		r.p.event(r.ref(cs), v1.EventTypeWarning, "Failed", "Error: %v", err)
		return 128, ctx.Err() == nil
	}
	klog.Infof("pod %s: container %s started, pid %d", r.key, cs.spec.Name, proc.pid)
	r.mu.Lock()
	cs.proc = proc
	cs.id = fmt.Sprintf("prober://%d", proc.pid)
	cs.state = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(proc.startedAt)}}
	cs.started = cs.spec.StartupProbe == nil
	cs.ready = cs.started && cs.spec.ReadinessProbe == nil && cs.kind != initCtr
	r.mu.Unlock()
	r.changed()
	r.p.event(r.ref(cs), v1.EventTypeNormal, "Started", "Container started")

	probeCtx, stopProbes := context.WithCancel(ctx)
	go r.probe(probeCtx, cs, proc)
	select {
	case <-proc.exited:
	case <-ctx.Done():
		r.mu.Lock()
		grace := r.killGrace
		r.mu.Unlock()
		r.kill(cs, proc, grace, fmt.Sprintf("Stopping container %s", cs.spec.Name))
	}
	stopProbes()

	code := proc.exitCode()
	term := &v1.ContainerStateTerminated{ExitCode: int32(code), Reason: "Completed", StartedAt: metav1.NewTime(proc.startedAt), FinishedAt: metav1.NewTime(proc.finishedAt), ContainerID: cs.id}
	if code != 0 {
		term.Reason = "Error"
	}
	if proc.ws.Signaled() {
		term.Signal = int32(proc.ws.Signal())
	}
	term.Message = r.terminationMessage(cs, ls, code)
	klog.Infof("pod %s: container %s exited with %d", r.key, cs.spec.Name, code)
	r.mu.Lock()
	cs.proc = nil
	cs.state = v1.ContainerState{Terminated: term}
	cs.ready, cs.started = false, false
	r.mu.Unlock()
	r.changed()
	return code, ctx.Err() == nil
}

// kill stops one instance: SIGTERM to its process group, SIGKILL after grace.
func (r *podRuntime) kill(cs *ctrState, proc *process, grace time.Duration, why string) {
	r.p.event(r.ref(cs), v1.EventTypeNormal, "Killing", "%s", why)
	_ = syscall.Kill(-proc.pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-proc.exited:
		return
	case <-t.C:
	}
	_ = syscall.Kill(-proc.pid, syscall.SIGKILL)
	<-proc.exited
}

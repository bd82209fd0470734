// One pod's life on the node: sandbox, volumes, init containers, containers, end and deletion.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

type podRuntime struct {
	p   *provider
	key string
	uid types.UID
	dir string // <state>/pods/<uid>: rendered volumes, /etc files, termination logs

	mu           sync.Mutex
	pod          *v1.Pod // latest object from the API
	sb           *sandbox
	podIPs       []string
	startTime    *metav1.Time
	sandboxUp    bool
	initialized  bool
	initFailed   bool
	phase        v1.PodPhase // set once the pod is over
	deleting     bool
	inits, ctrs  []*ctrState
	conds        map[v1.PodConditionType]v1.PodCondition // as last reported, for transition times
	volumes      map[string]string                       // volume name -> host directory or file
	killGrace    time.Duration
	tokenRefresh time.Time // when the earliest projected token is due for renewal
	pullFault    bool      // pull-error was on when the pod arrived

	ctx       context.Context // the pod's life; cancelled to stop it
	cancel    context.CancelFunc
	done      chan struct{} // closed when run has returned
	dirty     chan struct{}
	terminate func(grace time.Duration, confirmDelete bool)
}

func newPodRuntime(p *provider, pod *v1.Pod) *podRuntime {
	r := &podRuntime{
		p:         p,
		key:       podKey(pod.Namespace, pod.Name),
		uid:       pod.UID,
		dir:       filepath.Join(p.cfg.stateDir, "pods", string(pod.UID)),
		pod:       pod.DeepCopy(),
		conds:     map[v1.PodConditionType]v1.PodCondition{},
		pullFault: p.faults.pullError.Load(),
		done:      make(chan struct{}),
		dirty:     make(chan struct{}, 1),
		killGrace: 5 * time.Second,
	}
	for _, c := range pod.Spec.InitContainers {
		kind := initCtr
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			kind = sidecarCtr
		}
		r.inits = append(r.inits, newCtrState(c, kind, "PodInitializing"))
	}
	waitReason := "ContainerCreating"
	if len(r.inits) > 0 {
		waitReason = "PodInitializing"
	}
	for _, c := range pod.Spec.Containers {
		r.ctrs = append(r.ctrs, newCtrState(c, regularCtr, waitReason))
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	var once sync.Once
	r.terminate = func(grace time.Duration, confirm bool) {
		once.Do(func() { r.stop(grace, confirm) })
	}
	return r
}

// podCopy is the latest API object, safe to read without the lock.
func (r *podRuntime) podCopy() *v1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pod.DeepCopy()
}

func (r *podRuntime) netnsName() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sb != nil {
		return r.sb.netns
	}
	return r.p.cfg.nodeNetns
}

// changed schedules a status write; writes coalesce.
func (r *podRuntime) changed() {
	select {
	case r.dirty <- struct{}{}:
	default:
	}
}

// statusWriter publishes the status whenever it changed, one write at a time so an older
// status can never overtake a newer one; a change pending when it is stopped is still sent.
func (r *podRuntime) statusWriter(ctx context.Context) {
	for {
		select {
		case <-r.dirty:
			r.p.publish(r.snapshot())
		case <-ctx.Done():
			select {
			case <-r.dirty:
				r.p.publish(r.snapshot())
			default:
			}
			return
		}
	}
}

func (r *podRuntime) update(pod *v1.Pod) {
	r.mu.Lock()
	r.pod = pod.DeepCopy()
	r.mu.Unlock()
	r.refreshDownwardAPI()
	r.changed()
}

func (r *podRuntime) run() {
	defer close(r.done)
	ctx := r.ctx
	writerCtx, stopWriter := context.WithCancel(context.Background())
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		r.statusWriter(writerCtx)
	}()
	defer func() {
		stopWriter()
		<-writerDone
	}()

	now := metav1.Now()
	r.mu.Lock()
	r.startTime = &now
	r.mu.Unlock()
	r.changed()

	if adopted(r.podCopy()) {
		r.adopt(ctx)
		return
	}
	// Volumes first, as the kubelet mounts them before it creates the sandbox.
	if !r.setUpVolumes(ctx) || !r.setUpSandbox(ctx) {
		return
	}
	// Volumes live (token refresh, configMap updates) until the pod is over.
	volCtx, stopVolumes := context.WithCancel(ctx)
	defer stopVolumes()
	go r.refreshVolumes(volCtx)

	if d := r.p.faults.slowStartDelay(); d > 0 {
		klog.Infof("pod %s: fault slow-start: containers start in %v", r.key, d)
		if !sleepCtx(ctx, d) {
			return
		}
	}

	// Sidecars (init containers with restartPolicy Always) run until the regular containers end.
	sideCtx, stopSidecars := context.WithCancel(ctx)
	var sidecars sync.WaitGroup
	defer func() {
		stopSidecars()
		sidecars.Wait()
	}()
	for _, cs := range r.inits {
		if cs.kind == sidecarCtr {
			sidecars.Add(1)
			go func() {
				defer sidecars.Done()
				r.supervise(sideCtx, cs)
			}()
			if !r.waitStarted(ctx, cs) {
				return
			}
			continue
		}
		if !r.supervise(ctx, cs) {
			if ctx.Err() == nil { // failed for good (restartPolicy Never)
				r.mu.Lock()
				r.initFailed = true
				r.mu.Unlock()
				stopSidecars()
				sidecars.Wait()
				r.finish()
			}
			return
		}
	}
	r.mu.Lock()
	r.initialized = true
	r.mu.Unlock()
	r.changed()

	var wg sync.WaitGroup
	for _, cs := range r.ctrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.supervise(ctx, cs)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	// Every regular container is done for good (restartPolicy OnFailure/Never): the pod is over.
	stopSidecars()
	sidecars.Wait()
	r.finish()
}

// waitStarted waits until a sidecar has started (its startup probe, if any, passed).
func (r *podRuntime) waitStarted(ctx context.Context, cs *ctrState) bool {
	for {
		r.mu.Lock()
		started := cs.started
		r.mu.Unlock()
		if started {
			return true
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return false
		}
	}
}

// finish marks the pod Succeeded or Failed and frees its sandbox, as a kubelet tears it down.
func (r *podRuntime) finish() {
	r.mu.Lock()
	r.phase = r.computePhase(true)
	r.sandboxUp = false
	r.mu.Unlock()
	r.p.sandboxes.release(r.uid)
	r.removeRootfsDirs()
	klog.Infof("pod %s: %s", r.key, r.phase)
	r.changed()
}

func (r *podRuntime) setUpSandbox(ctx context.Context) bool {
	pod := r.podCopy()
	if pod.Spec.HostNetwork {
		r.mu.Lock()
		r.podIPs, r.sandboxUp = r.p.hostIPs, true
		r.mu.Unlock()
		r.changed()
		return true
	}
	for {
		sb := r.p.sandboxes.acquire(r.uid)
		var err error
		if sb == nil {
			err = fmt.Errorf("no free pod network namespace on node %s (all %d in use)", r.p.cfg.name, len(r.p.sandboxes.list))
		} else {
			sb.restore, err = applySysctls(sb.netns, podSysctls(pod))
			if err != nil {
				r.p.sandboxes.release(r.uid)
			}
		}
		if err == nil {
			klog.Infof("pod %s: sandbox %s %v", r.key, sb.netns, sb.ips)
			r.mu.Lock()
			r.sb, r.podIPs, r.sandboxUp = sb, sb.ips, true
			r.mu.Unlock()
			r.changed()
			return true
		}
		r.p.event(pod, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
		if !sleepCtx(ctx, 2*time.Second) {
			return false
		}
	}
}

func podSysctls(pod *v1.Pod) []v1.Sysctl {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	return pod.Spec.SecurityContext.Sysctls
}

// stop ends the pod: no more restarts, every process TERM then KILL after grace, sandbox
// freed. With confirmDelete (an API deletion) the final status is written and the pod object
// deleted with grace 0 once virtual-kubelet has written it.
func (r *podRuntime) stop(grace time.Duration, confirmDelete bool) {
	klog.Infof("pod %s: stopping (grace %v)", r.key, grace)
	r.mu.Lock()
	r.deleting = true
	r.killGrace = grace
	r.mu.Unlock()
	r.cancel()
	<-r.done
	r.p.sandboxes.release(r.uid)
	r.mu.Lock()
	r.sandboxUp = false
	r.mu.Unlock()
	r.removeRootfsDirs()
	if !confirmDelete {
		return
	}
	final := r.snapshot()
	r.p.publish(final)
	r.confirmDeletion(final)
	_ = os.RemoveAll(r.dir)
}

// removeRootfsDirs removes the pod's (empty) container mount points. Only rmdir: the mounts
// existed in the containers' private mount namespaces, so on the host the directories are
// empty, and should one not be, nothing below it is touched.
func (r *podRuntime) removeRootfsDirs() {
	dir := filepath.Join(r.p.cfg.stateDir, "rootfs", string(r.uid))
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = os.Remove(filepath.Join(dir, e.Name()))
	}
	_ = os.Remove(dir)
}

// confirmDeletion waits (briefly) for the final status to reach the API, then deletes the
// pod with grace 0 and a UID precondition, as the kubelet's status manager does.
func (r *podRuntime) confirmDeletion(final *v1.Pod) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		cur, err := r.p.podLister.Pods(final.Namespace).Get(final.Name)
		if err != nil || cur.UID != r.uid {
			return // already gone
		}
		if cur.Status.Phase == final.Status.Phase && !anyRunning(cur.Status.ContainerStatuses) {
			break
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	for {
		opts := *metav1.NewDeleteOptions(0)
		opts.Preconditions = metav1.NewUIDPreconditions(string(r.uid))
		err := r.p.client.CoreV1().Pods(final.Namespace).Delete(context.Background(), final.Name, opts)
		if err == nil {
			klog.Infof("pod %s: deleted", r.key)
			return
		}
		if _, lerr := r.p.podLister.Pods(final.Namespace).Get(final.Name); lerr != nil {
			return // gone anyway
		}
		klog.Warningf("pod %s: confirming deletion: %v (retrying)", r.key, err)
		time.Sleep(time.Second)
	}
}

func anyRunning(list []v1.ContainerStatus) bool {
	for _, s := range list {
		if s.State.Running != nil {
			return true
		}
	}
	return false
}

// sleepCtx sleeps d, or less when ctx ends; it reports whether ctx is still alive.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

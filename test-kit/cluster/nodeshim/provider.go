// The virtual-kubelet provider: the set of pods this node runs and the PodLifecycleHandler calls on it.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	v1 "k8s.io/api/core/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

type provider struct {
	cfg       *config
	client    kubernetes.Interface
	recorder  record.EventRecorder
	faults    *faults
	podLister corev1listers.PodLister     // pods bound to this node, as the API has them
	services  corev1listers.ServiceLister // for service environment variables
	sandboxes *sandboxPool
	hostIPs   []string
	self      string // this binary, re-executed as mount-exec
	ipPath    string
	nsenter   string

	mu       sync.Mutex
	pods     map[string]*podRuntime // namespace/name -> pod not yet being deleted
	notify   func(*v1.Pod)
	stopping bool
}

var _ nodeutil.Provider = (*provider)(nil)

func newProvider(cfg *config, client kubernetes.Interface, rec record.EventRecorder, f *faults, pc nodeutil.ProviderConfig) (*provider, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &provider{
		cfg: cfg, client: client, recorder: rec, faults: f,
		podLister: pc.Pods, services: pc.Services,
		sandboxes: &sandboxPool{list: cfg.sandboxes},
		hostIPs:   primaryIPs(cfg.addresses),
		self:      self,
		pods:      map[string]*podRuntime{},
	}
	if p.ipPath, err = exec.LookPath("ip"); err != nil && (cfg.nodeNetns != "" || len(cfg.sandboxes) > 0) {
		return nil, fmt.Errorf("iproute2 is needed to enter network namespaces: %w", err)
	}
	if p.nsenter, err = exec.LookPath("nsenter"); err != nil {
		klog.Warningf("nsenter (util-linux) not found: exec and exec probes will fail")
	}
	return p, nil
}

func podKey(namespace, name string) string { return namespace + "/" + name }

func notFound(namespace, name string) error {
	return errdefs.NotFoundf("pod %s/%s is not known on this node", namespace, name)
}

func (p *provider) get(namespace, name string) *podRuntime {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pods[podKey(namespace, name)]
}

// event records a kubelet event about obj (a pod, or a reference to one of its containers).
func (p *provider) event(obj kruntime.Object, typ, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	name := ""
	switch o := obj.(type) {
	case *v1.Pod:
		name = o.Namespace + "/" + o.Name
	case *v1.ObjectReference:
		name = o.Namespace + "/" + o.Name + " " + o.FieldPath
	}
	klog.Infof("event %s %s %s: %s", name, typ, reason, msg)
	p.recorder.Event(obj, typ, reason, msg)
}

// publish hands a pod's new status to virtual-kubelet, which writes it to the API.
func (p *provider) publish(pod *v1.Pod) {
	p.mu.Lock()
	notify, stopping := p.notify, p.stopping
	p.mu.Unlock()
	if notify != nil && !stopping {
		notify(pod)
	}
}

func (p *provider) CreatePod(_ context.Context, pod *v1.Pod) error {
	key := podKey(pod.Namespace, pod.Name)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return fmt.Errorf("node is shutting down")
	}
	if old := p.pods[key]; old != nil {
		if old.uid == pod.UID {
			return nil
		}
		// A pod of the same name replaced one whose deletion this node never saw (a force
		// delete and quick re-create): the old one's containers must not run on.
		klog.Infof("pod %s: replaced by a new pod (%s); stopping the old one (%s)", key, pod.UID, old.uid)
		go old.terminate(2*time.Second, false)
	}
	r := newPodRuntime(p, pod)
	p.pods[key] = r
	klog.Infof("pod %s (%s): accepted", key, pod.UID)
	go r.run()
	return nil
}

func (p *provider) UpdatePod(ctx context.Context, pod *v1.Pod) error {
	r := p.get(pod.Namespace, pod.Name)
	if r == nil || r.uid != pod.UID {
		return p.CreatePod(ctx, pod)
	}
	r.update(pod)
	return nil
}

// DeletePod starts stopping the pod's containers and returns at once; the pod confirms the
// deletion to the API itself (grace 0) once its processes are gone, as a kubelet does.
func (p *provider) DeletePod(_ context.Context, pod *v1.Pod) error {
	key := podKey(pod.Namespace, pod.Name)
	p.mu.Lock()
	r := p.pods[key]
	if r != nil && (pod.UID == "" || r.uid == pod.UID) {
		delete(p.pods, key)
	} else {
		r = nil
	}
	p.mu.Unlock()
	if r == nil {
		return notFound(pod.Namespace, pod.Name)
	}
	go r.terminate(deletionGrace(pod), true)
	return nil
}

// deletionGrace is the pod's grace period, capped at 5s to keep tests fast (a kubelet waits it all).
func deletionGrace(pod *v1.Pod) time.Duration {
	g := int64(30)
	if pod.DeletionGracePeriodSeconds != nil {
		g = *pod.DeletionGracePeriodSeconds
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		g = *pod.Spec.TerminationGracePeriodSeconds
	}
	return min(time.Duration(g)*time.Second, 5*time.Second)
}

func (p *provider) GetPod(_ context.Context, namespace, name string) (*v1.Pod, error) {
	r := p.get(namespace, name)
	if r == nil {
		return nil, notFound(namespace, name)
	}
	return r.snapshot(), nil
}

func (p *provider) GetPodStatus(ctx context.Context, namespace, name string) (*v1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

func (p *provider) GetPods(context.Context) ([]*v1.Pod, error) {
	p.mu.Lock()
	list := make([]*podRuntime, 0, len(p.pods))
	for _, r := range p.pods {
		list = append(list, r)
	}
	p.mu.Unlock()
	pods := make([]*v1.Pod, 0, len(list))
	for _, r := range list {
		pods = append(pods, r.snapshot())
	}
	return pods, nil
}

func (p *provider) NotifyPods(_ context.Context, cb func(*v1.Pod)) {
	p.mu.Lock()
	p.notify = cb
	p.mu.Unlock()
}

// shutdown stops every container (TERM, then KILL after grace) without telling the API.
func (p *provider) shutdown(grace time.Duration) {
	p.mu.Lock()
	p.stopping = true
	list := make([]*podRuntime, 0, len(p.pods))
	for k, r := range p.pods {
		list = append(list, r)
		delete(p.pods, k)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.terminate(grace, false)
		}()
	}
	wg.Wait()
}

func (p *provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errdefs.InvalidInput("attach is not supported by nodeshim")
}

func (p *provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: p.cfg.name}}, nil
}

func (p *provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, nil
}

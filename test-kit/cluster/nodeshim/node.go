// The node itself: API client, Node object, virtual-kubelet wiring, kubelet API listener and shutdown.
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	"github.com/virtual-kubelet/virtual-kubelet/log/klogv2"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// kubeletVersion is what the node reports; it emulates the control plane's own release.
const kubeletVersion = "v1.36.3"

func runCommand(args []string) error {
	cfg, err := parseRunFlags(args)
	if err != nil {
		return err
	}
	log.L = klogv2.New(nil)
	for _, d := range []string{"logs", "faults", "pods", "rootfs"} {
		if err := os.MkdirAll(filepath.Join(cfg.stateDir, d), 0o755); err != nil {
			return err
		}
	}

	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := startReaper(self, cfg.stateDir); err != nil {
		return fmt.Errorf("reaper: %w", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	flt := newFaults(filepath.Join(cfg.stateDir, "faults"))
	go flt.run(ctx)

	restCfg, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	restCfg.UserAgent = "nodeshim/" + cfg.name
	restCfg.QPS, restCfg.Burst = 50, 100
	restCfg.WrapTransport = flt.wrapTransport
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}

	eb := record.NewBroadcaster()
	eb.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer eb.Shutdown()
	recorder := eb.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: cfg.name})

	// NewNode builds a default client from $KUBECONFIG before its options replace it; point
	// it at our kubeconfig so that it does not complain about missing in-cluster config.
	os.Setenv("KUBECONFIG", cfg.kubeconfig)
	var prov *provider
	np := &nodeProvider{faults: flt}
	mux := http.NewServeMux()
	// Retry every API failure quickly and for ever, as a kubelet does: after a not-ready
	// fault ends, pending status writes and delete confirmations must catch up in seconds.
	fastRetry := func(pc *node.PodControllerConfig) error {
		limiter := func() workqueue.TypedRateLimiter[any] {
			return workqueue.NewTypedItemExponentialFailureRateLimiter[any](100*time.Millisecond, 2*time.Second)
		}
		retry := func(context.Context, string, int, time.Time, error) (*time.Duration, error) { return nil, nil }
		pc.SyncPodsFromKubernetesRateLimiter, pc.SyncPodsFromKubernetesShouldRetryFunc = limiter(), retry
		pc.DeletePodsFromKubernetesRateLimiter, pc.DeletePodsFromKubernetesShouldRetryFunc = limiter(), retry
		pc.SyncPodStatusFromProviderRateLimiter, pc.SyncPodStatusFromProviderShouldRetryFunc = limiter(), retry
		return nil
	}
	tlsOpts := []func(*tls.Config) error{nodeutil.WithKeyPairFromPath(cfg.tlsCert, cfg.tlsKey)}
	if cfg.clientCA != "" {
		tlsOpts = append(tlsOpts, nodeutil.WithCAFromPath(cfg.clientCA))
	}
	n, err := nodeutil.NewNode(cfg.name,
		func(pc nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
			prov, err = newProvider(cfg, client, recorder, flt, pc)
			return prov, np, err
		},
		func(nc *nodeutil.NodeConfig) error {
			nc.Client = nodeScopedClient{client}
			nc.NodeSpec = nodeObject(cfg)
			nc.HTTPListenAddr = cfg.listen
			nc.Handler = flt.kubeletHandler(mux)
			nc.EventRecorder = dropProviderEvents{recorder}
			// The shim resolves env itself, once the pod IP is known (status.podIP refs).
			nc.SkipDownwardAPIResolution = true
			nc.InformerResyncPeriod = time.Minute
			nc.NumWorkers = 4
			return nil
		},
		nodeutil.WithTLSConfig(tlsOpts...),
		nodeutil.AttachProviderRoutes(mux),
		nodeutil.WithPodControllerConfigOverrides(fastRetry),
	)
	if err != nil {
		return err
	}
	np.node = nodeObject(cfg)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sigs
		klog.Infof("received %v: stopping all containers", s)
		prov.shutdown(2 * time.Second)
		cancel()
	}()

	klog.Infof("node %s starting: kubelet API on %s, %d pod sandboxes, state in %s", cfg.name, cfg.listen, len(cfg.sandboxes), cfg.stateDir)
	go func() {
		if err := n.WaitReady(ctx, 0); err == nil {
			klog.Infof("node %s registered and ready", cfg.name)
			np.heartbeat(ctx)
		}
	}()
	err = n.Run(ctx)
	if ctx.Err() != nil { // stopped by a signal: a clean exit
		klog.Infof("node %s stopped", cfg.name)
		return nil
	}
	prov.shutdown(2 * time.Second)
	return err
}

// nodeObject is the Node the shim registers, filled in like a kubelet's.
func nodeObject(cfg *config) v1.Node {
	labels := map[string]string{
		"kubernetes.io/hostname":  cfg.name,
		"kubernetes.io/os":        "linux",
		"kubernetes.io/arch":      runtime.GOARCH,
		"beta.kubernetes.io/os":   "linux",
		"beta.kubernetes.io/arch": runtime.GOARCH,
	}
	for k, v := range cfg.labels {
		labels[k] = v
	}
	capacity := v1.ResourceList{
		v1.ResourceCPU:              cfg.cpu,
		v1.ResourceMemory:           cfg.memory,
		v1.ResourcePods:             *resource.NewQuantity(int64(cfg.pods), resource.DecimalSI),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	addresses := []v1.NodeAddress{}
	for _, ip := range primaryIPs(cfg.addresses) {
		addresses = append(addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	addresses = append(addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: cfg.name})
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	now := metav1.Now()
	cond := func(t v1.NodeConditionType, s v1.ConditionStatus, reason, msg string) v1.NodeCondition {
		return v1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	n := v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.name, Labels: labels},
		Spec:       v1.NodeSpec{Taints: cfg.taints, PodCIDRs: cfg.podCIDRs},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Phase:       v1.NodeRunning,
			Conditions: []v1.NodeCondition{
				cond(v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(v1.NodeReady, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"),
			},
			Addresses:       addresses,
			DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: cfg.kubeletPort}},
			NodeInfo: v1.NodeSystemInfo{
				MachineID:               cfg.name,
				SystemUUID:              cfg.name,
				BootID:                  fmt.Sprintf("nodeshim-%d", os.Getpid()),
				KernelVersion:           unix.ByteSliceToString(uts.Release[:]),
				OSImage:                 "prober nodeshim",
				ContainerRuntimeVersion: "prober://nodeshim",
				KubeletVersion:          kubeletVersion,
				OperatingSystem:         "linux",
				Architecture:            runtime.GOARCH,
			},
		},
	}
	if len(cfg.podCIDRs) > 0 {
		n.Spec.PodCIDR = cfg.podCIDRs[0]
	}
	return n
}

// primaryIPs keeps the first IPv4 and the first IPv6 address, in the order given.
func primaryIPs(ips []net.IP) []string {
	var out []string
	var have4, have6 bool
	for _, ip := range ips {
		if ip.To4() != nil && !have4 {
			have4 = true
			out = append(out, ip.String())
		} else if ip.To4() == nil && !have6 {
			have6 = true
			out = append(out, ip.String())
		}
	}
	return out
}

// nodeProvider reports node status to virtual-kubelet's NodeController.
type nodeProvider struct {
	faults *faults
	node   v1.Node
	notify func(*v1.Node)
}

func (np *nodeProvider) Ping(ctx context.Context) error { return ctx.Err() }

func (np *nodeProvider) NotifyNodeStatus(_ context.Context, cb func(*v1.Node)) { np.notify = cb }

// heartbeat re-posts the Ready status every 10s (the kubelet's node-status-update-frequency):
// after a not-ready fault the node-lifecycle controller has set Ready=Unknown and only a
// status post from the node turns it back to True.
func (np *nodeProvider) heartbeat(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	wasDown := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-np.faults.changed():
		}
		down := np.faults.notReady.Load()
		if down || np.notify == nil {
			wasDown = wasDown || down
			continue
		}
		if wasDown {
			klog.Infof("API reachable again: posting Ready node status")
			wasDown = false
		}
		n := np.node.DeepCopy()
		now := metav1.Now()
		for i := range n.Status.Conditions {
			n.Status.Conditions[i].LastHeartbeatTime = now
		}
		select {
		case <-ctx.Done():
			return
		default:
			np.notify(n)
		}
	}
}

// nodeScopedClient hides cluster-wide secret and configmap list/watch from virtual-kubelet's
// informers: the Node authorizer forbids them, so they would fail (and log) for ever. The shim
// reads the secrets and configmaps of its pods one by one with the real client instead.
type nodeScopedClient struct{ kubernetes.Interface }

func (c nodeScopedClient) CoreV1() corev1client.CoreV1Interface {
	return nodeScopedCore{c.Interface.CoreV1()}
}

type nodeScopedCore struct{ corev1client.CoreV1Interface }

func (c nodeScopedCore) Secrets(ns string) corev1client.SecretInterface {
	return noListSecrets{c.CoreV1Interface.Secrets(ns)}
}

func (c nodeScopedCore) ConfigMaps(ns string) corev1client.ConfigMapInterface {
	return noListConfigMaps{c.CoreV1Interface.ConfigMaps(ns)}
}

type noListSecrets struct{ corev1client.SecretInterface }

func (noListSecrets) List(context.Context, metav1.ListOptions) (*v1.SecretList, error) {
	return &v1.SecretList{}, nil
}
func (noListSecrets) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

type noListConfigMaps struct {
	corev1client.ConfigMapInterface
}

func (noListConfigMaps) List(context.Context, metav1.ListOptions) (*v1.ConfigMapList, error) {
	return &v1.ConfigMapList{}, nil
}
func (noListConfigMaps) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

// dropProviderEvents drops virtual-kubelet's own bookkeeping events ("Create pod in provider
// successfully"), which a kubelet never emits; failures still go through.
type dropProviderEvents struct{ record.EventRecorder }

func (d dropProviderEvents) Event(o kruntime.Object, typ, reason, msg string) {
	if !strings.HasPrefix(reason, "Provider") || !strings.HasSuffix(reason, "Success") {
		d.EventRecorder.Event(o, typ, reason, msg)
	}
}

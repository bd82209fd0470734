// Adopted pods: a pod whose template carries the adopt annotation stands for something the lab
// already runs outside the shim (flannel's kernel VXLAN device, the lab's DNS server), so the
// shim starts nothing and reports it Running and Ready at once, on the node's addresses or the
// address the annotation names. The control plane (EndpointSlices, DaemonSet status) then sees
// it as it would see the real workload.
package main

import (
	"context"
	"net"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

const (
	adoptAnnotation   = "nodeshim.prober.test/adopt"
	adoptIPAnnotation = "nodeshim.prober.test/pod-ip"
)

// adopted reports whether the pod is one the shim adopts rather than runs.
func adopted(pod *v1.Pod) bool {
	return pod.Annotations[adoptAnnotation] == "true"
}

// adopt marks every container running, started and ready, with no process, and holds the pod
// so until it is deleted.
func (r *podRuntime) adopt(ctx context.Context) {
	pod := r.podCopy()
	ips := r.p.hostIPs
	if ip := pod.Annotations[adoptIPAnnotation]; ip != "" && net.ParseIP(ip) != nil {
		ips = []string{ip}
	}
	now := metav1.Now()
	r.mu.Lock()
	r.podIPs, r.sandboxUp, r.initialized = ips, true, true
	for _, cs := range r.inits {
		cs.state = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}}
	}
	for _, cs := range r.ctrs {
		cs.state = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}}
		cs.started, cs.ready = true, true
		cs.id = "prober://adopted"
	}
	r.mu.Unlock()
	klog.Infof("pod %s: adopted (stands for what the lab runs), IPs %v", r.key, ips)
	r.changed()
	<-ctx.Done()
}

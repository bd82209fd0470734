// Pod status as a kubelet reports it: phase, conditions, IPs and container statuses.
package main

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// kubeletConditions are the condition types the kubelet owns; others are kept as the API has them.
var kubeletConditions = map[v1.PodConditionType]bool{
	v1.PodReadyToStartContainers: true, v1.PodInitialized: true, v1.ContainersReady: true, v1.PodReady: true,
}

// snapshot is the pod as the API should see it now: the latest object with the node's status.
func (r *podRuntime) snapshot() *v1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	pod := r.pod.DeepCopy()
	apiStatus := pod.Status
	if cur, err := r.p.podLister.Pods(pod.Namespace).Get(pod.Name); err == nil && cur.UID == pod.UID {
		apiStatus = cur.Status
	}
	st := v1.PodStatus{
		QOSClass:           apiStatus.QOSClass,
		NominatedNodeName:  apiStatus.NominatedNodeName,
		ObservedGeneration: pod.Generation,
		StartTime:          r.startTime,
	}
	phase := r.phase
	if phase == "" {
		phase = r.computePhase(false)
	}
	st.Phase = phase
	if len(r.p.hostIPs) > 0 {
		st.HostIP = r.p.hostIPs[0]
		for _, ip := range r.p.hostIPs {
			st.HostIPs = append(st.HostIPs, v1.HostIP{IP: ip})
		}
	}
	if len(r.podIPs) > 0 {
		st.PodIP = r.podIPs[0]
		for _, ip := range r.podIPs {
			st.PodIPs = append(st.PodIPs, v1.PodIP{IP: ip})
		}
	}
	for _, cs := range r.inits {
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs.status())
	}
	for _, cs := range r.ctrs {
		st.ContainerStatuses = append(st.ContainerStatuses, cs.status())
	}
	// The kubelet lists container statuses by name.
	sort.Slice(st.ContainerStatuses, func(i, j int) bool { return st.ContainerStatuses[i].Name < st.ContainerStatuses[j].Name })

	ours := r.conditions(pod, phase, apiStatus.Conditions)
	for _, c := range ours {
		prev, ok := r.conds[c.Type]
		if ok && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		} else {
			c.LastTransitionTime = metav1.Now()
		}
		c.ObservedGeneration = pod.Generation
		r.conds[c.Type] = c
		st.Conditions = append(st.Conditions, c)
	}
	for _, c := range apiStatus.Conditions {
		if !kubeletConditions[c.Type] {
			st.Conditions = append(st.Conditions, c)
		}
	}
	pod.Status = st
	return pod
}

// status is the API view of one container.
func (cs *ctrState) status() v1.ContainerStatus {
	started := cs.started
	s := v1.ContainerStatus{
		Name:                 cs.spec.Name,
		Image:                cs.spec.Image,
		ImageID:              cs.imageID,
		ContainerID:          cs.id,
		Ready:                cs.ready,
		Started:              &started,
		RestartCount:         cs.restarts,
		State:                *cs.state.DeepCopy(),
		LastTerminationState: *cs.last.DeepCopy(),
	}
	// The kubelet reports an init container that completed as ready.
	if cs.kind == initCtr && cs.state.Terminated != nil && cs.state.Terminated.ExitCode == 0 {
		s.Ready = true
	}
	return s
}

// computePhase is the kubelet's getPhase; over means the pod will not run again (deleted or
// finished), so a restartPolicy Always pod ends Succeeded/Failed too. Callers hold mu.
func (r *podRuntime) computePhase(over bool) v1.PodPhase {
	if r.initFailed {
		return v1.PodFailed
	}
	if !r.initialized {
		if over || r.deleting {
			return v1.PodFailed
		}
		return v1.PodPending
	}
	var running, waiting, stopped, succeeded int
	for _, cs := range r.ctrs {
		switch {
		case cs.state.Running != nil:
			running++
		case cs.state.Terminated != nil:
			stopped++
			if cs.state.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.last.Terminated != nil:
			stopped++ // waiting to restart
		default:
			waiting++
		}
	}
	over = over || (r.deleting && running == 0)
	switch {
	case over && stopped == succeeded && waiting == 0:
		return v1.PodSucceeded
	case over:
		return v1.PodFailed
	case waiting > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped > 0:
		policy := r.pod.Spec.RestartPolicy
		if policy == v1.RestartPolicyAlways {
			return v1.PodRunning
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		if policy == v1.RestartPolicyNever {
			return v1.PodFailed
		}
		return v1.PodRunning
	}
	return v1.PodPending
}

// conditions are the kubelet-owned conditions for the current state. Callers hold mu.
func (r *podRuntime) conditions(pod *v1.Pod, phase v1.PodPhase, apiConds []v1.PodCondition) []v1.PodCondition {
	cond := func(t v1.PodConditionType, ok bool, reason, msg string) v1.PodCondition {
		if ok {
			return v1.PodCondition{Type: t, Status: v1.ConditionTrue}
		}
		return v1.PodCondition{Type: t, Status: v1.ConditionFalse, Reason: reason, Message: msg}
	}
	var incomplete []string
	for _, cs := range r.inits {
		if !r.initialized && !(cs.kind == sidecarCtr && cs.started) && !(cs.state.Terminated != nil && cs.state.Terminated.ExitCode == 0) {
			incomplete = append(incomplete, cs.spec.Name)
		}
	}
	var unready []string
	for _, cs := range r.ctrs {
		if !cs.ready {
			unready = append(unready, cs.spec.Name)
		}
	}
	for _, cs := range r.inits {
		if cs.kind == sidecarCtr && !cs.ready {
			unready = append(unready, cs.spec.Name)
		}
	}
	sort.Strings(unready)
	initialized := cond(v1.PodInitialized, r.initialized || len(r.inits) == 0, "ContainersNotInitialized",
		fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incomplete, " ")))
	msg := fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	reason := "ContainersNotReady"
	if phase == v1.PodSucceeded {
		reason, msg = "PodCompleted", ""
	}
	ctrsReady := cond(v1.ContainersReady, len(unready) == 0 && phase == v1.PodRunning, reason, msg)
	ready := ctrsReady
	ready.Type = v1.PodReady
	if ready.Status == v1.ConditionTrue {
		for _, g := range pod.Spec.ReadinessGates {
			found := false
			for _, c := range apiConds {
				if c.Type == g.ConditionType {
					found = c.Status == v1.ConditionTrue
				}
			}
			if !found {
				ready = cond(v1.PodReady, false, "ReadinessGatesNotReady", fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
				break
			}
		}
	}
	return []v1.PodCondition{
		cond(v1.PodReadyToStartContainers, r.sandboxUp, "", ""),
		initialized,
		ready,
		ctrsReady,
	}
}

// What a container sees of its pod: environment (env, envFrom, downward API, service links, $(VAR)) and /etc/hosts, hostname, resolv.conf.
package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

const defaultPath = "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// containerEnv builds the environment as the kubelet does: service variables lowest, then
// envFrom, then env (with $(VAR) expansion), plus what the runtime and image would add.
func (r *podRuntime) containerEnv(ctx context.Context, pod *v1.Pod, c *v1.Container) ([]string, error) {
	svcEnv := r.serviceEnv(ctx, pod)
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, ef := range c.EnvFrom {
		var data map[string]string
		switch {
		case ef.ConfigMapRef != nil:
			cm, err := r.p.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ef.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if isNotFound(err) && ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional {
					continue
				}
				return nil, err
			}
			data = cm.Data
		case ef.SecretRef != nil:
			s, err := r.p.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ef.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if isNotFound(err) && ef.SecretRef.Optional != nil && *ef.SecretRef.Optional {
					continue
				}
				return nil, err
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		for _, k := range sortedKeys(data) {
			set(ef.Prefix+k, data[k])
		}
	}
	lookup := func(name string) (string, bool) {
		if v, ok := env[name]; ok {
			return v, true
		}
		v, ok := svcEnv[name]
		return v, ok
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expandVars(e.Value, lookup))
			continue
		}
		v, ok, err := r.envSource(ctx, pod, c, e.ValueFrom)
		if err != nil {
			return nil, err
		}
		if ok {
			set(e.Name, v)
		}
	}
	for _, k := range sortedKeys(svcEnv) {
		if _, ok := env[k]; !ok {
			set(k, svcEnv[k])
		}
	}
	hostname := r.p.cfg.name
	if !pod.Spec.HostNetwork {
		hostname = podHostname(pod)
	}
	home := "/"
	if uid, _, _, _ := securityIDs(pod, c); uid == 0 {
		home = "/root"
	}
	for k, v := range map[string]string{"PATH": defaultPath, "HOSTNAME": hostname, "HOME": home} {
		if _, ok := env[k]; !ok {
			set(k, v)
		}
	}
	list := make([]string, 0, len(order))
	for _, k := range order {
		list = append(list, k+"="+env[k])
	}
	return list, nil
}

// envSource resolves valueFrom; ok is false for an optional reference that is absent.
func (r *podRuntime) envSource(ctx context.Context, pod *v1.Pod, c *v1.Container, src *v1.EnvVarSource) (string, bool, error) {
	switch {
	case src.FieldRef != nil:
		v, err := r.fieldValue(pod, src.FieldRef.FieldPath)
		return v, true, err
	case src.ResourceFieldRef != nil:
		ref := *src.ResourceFieldRef
		if ref.ContainerName == "" {
			ref.ContainerName = c.Name
		}
		v, err := r.resourceValue(pod, &ref)
		return v, true, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, err := r.p.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if optional && isNotFound(err) {
				return "", false, nil
			}
			return "", false, err
		}
		if v, ok := cm.Data[ref.Key]; ok {
			return v, true, nil
		}
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		s, err := r.p.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			if optional && isNotFound(err) {
				return "", false, nil
			}
			return "", false, err
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), true, nil
		}
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
	}
	return "", false, fmt.Errorf("unsupported env source")
}

// fieldValue is a downward API field (whole label/annotation maps only occur in volumes).
func (r *podRuntime) fieldValue(pod *v1.Pod, path string) (string, error) {
	r.mu.Lock()
	podIPs := r.podIPs
	r.mu.Unlock()
	first := func(l []string) string {
		if len(l) == 0 {
			return ""
		}
		return l[0]
	}
	if m, key, ok := subscript(path); ok {
		switch m {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return r.p.cfg.name, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return first(r.p.hostIPs), nil
	case "status.hostIPs":
		return strings.Join(r.p.hostIPs, ","), nil
	case "status.podIP":
		return first(podIPs), nil
	case "status.podIPs":
		return strings.Join(podIPs, ","), nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// subscript splits "metadata.labels['key']".
func subscript(path string) (string, string, bool) {
	i := strings.Index(path, "['")
	if i < 0 || !strings.HasSuffix(path, "']") {
		return "", "", false
	}
	return path[:i], path[i+2 : len(path)-2], true
}

// formatMap renders labels/annotations like the kubelet's downward API files: key="value" lines.
func formatMap(m map[string]string) string {
	var b strings.Builder
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s=%s", k, strconv.Quote(m[k]))
	}
	return b.String()
}

// resourceValue is a resourceFieldRef: the container's request or limit (limits default to the
// node's allocatable), rounded up in units of the divisor.
func (r *podRuntime) resourceValue(pod *v1.Pod, ref *v1.ResourceFieldSelector) (string, error) {
	var c *v1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == ref.ContainerName {
			c = &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == ref.ContainerName {
			c = &pod.Spec.InitContainers[i]
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: no container %q", ref.ContainerName)
	}
	kind, name, _ := strings.Cut(ref.Resource, ".")
	res := v1.ResourceName(name)
	var q resource.Quantity
	switch kind {
	case "limits":
		q = c.Resources.Limits[res]
		if q.IsZero() {
			switch res {
			case v1.ResourceCPU:
				q = r.p.cfg.cpu
			case v1.ResourceMemory:
				q = r.p.cfg.memory
			case v1.ResourceEphemeralStorage:
				q = resource.MustParse("100Gi")
			}
		}
	case "requests":
		q = c.Resources.Requests[res]
	default:
		return "", fmt.Errorf("unsupported resource %q", ref.Resource)
	}
	div := ref.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	if res == v1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(div.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(div.Value()))), 10), nil
}

// serviceEnv is the kubelet's service environment: the `kubernetes` Service of default always,
// the pod namespace's Services too unless enableServiceLinks is false.
func (r *podRuntime) serviceEnv(ctx context.Context, pod *v1.Pod) map[string]string {
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	chosen := map[string]*v1.Service{}
	svcs, _ := r.p.services.List(labels.Everything())
	haveMaster := false
	for _, s := range svcs {
		if s.Namespace == metav1.NamespaceDefault && s.Name == "kubernetes" {
			haveMaster = true
		}
	}
	if !haveMaster { // informer not synced yet
		if s, err := r.p.client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{}); err == nil {
			svcs = append(svcs, s)
		}
	}
	for _, s := range svcs {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == v1.ClusterIPNone {
			continue
		}
		if s.Namespace == metav1.NamespaceDefault && s.Name == "kubernetes" {
			if _, ok := chosen[s.Name]; !ok {
				chosen[s.Name] = s
			}
		} else if s.Namespace == pod.Namespace && links {
			chosen[s.Name] = s
		}
	}
	env := map[string]string{}
	for _, s := range chosen {
		prefix := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
		ip := s.Spec.ClusterIP
		env[prefix+"_SERVICE_HOST"] = ip
		for i, sp := range s.Spec.Ports {
			port := strconv.Itoa(int(sp.Port))
			if i == 0 {
				env[prefix+"_SERVICE_PORT"] = port
			}
			if sp.Name != "" {
				env[prefix+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(sp.Name, "-", "_"))] = port
			}
			proto := string(sp.Protocol)
			if proto == "" {
				proto = "TCP"
			}
			url := strings.ToLower(proto) + "://" + net.JoinHostPort(ip, port)
			if i == 0 {
				env[prefix+"_PORT"] = url
			}
			pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, sp.Port, strings.ToUpper(proto))
			env[pp] = url
			env[pp+"_PROTO"] = strings.ToLower(proto)
			env[pp+"_PORT"] = port
			env[pp+"_ADDR"] = ip
		}
	}
	return env
}

// expandVars expands $(VAR) like Kubernetes: unknown references stay as written, $$ is a $.
func expandVars(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// envLookup looks names up in a KEY=VALUE list.
func envLookup(env []string) func(string) (string, bool) {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// podHostname is the pod's hostname: spec.hostname or its name, as a DNS label.
func podHostname(pod *v1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

// writeEtcFiles writes the pod's /etc/hosts, /etc/hostname and /etc/resolv.conf.
func (r *podRuntime) writeEtcFiles(pod *v1.Pod, podIPs []string) (string, error) {
	dir := filepath.Join(r.dir, "etc")
	hostname := r.p.cfg.name
	var hosts strings.Builder
	if pod.Spec.HostNetwork {
		hosts.WriteString("# Kubernetes-managed hosts file (host network).\n")
		if b, err := os.ReadFile(filepath.Join(r.p.cfg.hostRoot, "etc/hosts")); err == nil {
			hosts.Write(b)
		} else {
			hosts.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
		}
	} else {
		hostname = podHostname(pod)
		hosts.WriteString("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
			"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
		names := hostname
		if pod.Spec.Subdomain != "" {
			names = fmt.Sprintf("%s.%s.%s.svc.cluster.local\t%s", hostname, pod.Spec.Subdomain, pod.Namespace, hostname)
		}
		for _, ip := range podIPs {
			fmt.Fprintf(&hosts, "%s\t%s\n", ip, names)
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		hosts.WriteString("\n# Entries added by HostAliases.\n")
		for _, ha := range pod.Spec.HostAliases {
			fmt.Fprintf(&hosts, "%s\t%s\n", ha.IP, strings.Join(ha.Hostnames, "\t"))
		}
	}
	files := map[string]string{"hosts": hosts.String(), "hostname": hostname + "\n", "resolv.conf": r.resolvConf(pod)}
	for name, content := range files {
		if err := writeFileAtomic(filepath.Join(dir, name), []byte(content), 0o644, -1); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// resolvConf follows dnsPolicy: the cluster DNS for ClusterFirst (ClusterFirstWithHostNet
// for hostNetwork pods), else the node's resolv.conf; dnsConfig is merged in.
func (r *podRuntime) resolvConf(pod *v1.Pod) string {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	cluster := r.p.cfg.clusterDNS != "" &&
		(policy == v1.DNSClusterFirstWithHostNet || (policy == v1.DNSClusterFirst && !pod.Spec.HostNetwork))
	var servers, search, options []string
	switch {
	case policy == v1.DNSNone:
	case cluster:
		servers = []string{r.p.cfg.clusterDNS}
		search = []string{pod.Namespace + ".svc.cluster.local", "svc.cluster.local", "cluster.local"}
		options = []string{"ndots:5"}
	default:
		b, _ := os.ReadFile(filepath.Join(r.p.cfg.hostRoot, "etc/resolv.conf"))
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			switch f[0] {
			case "nameserver":
				servers = append(servers, f[1])
			case "search", "domain":
				search = append(search, f[1:]...)
			case "options":
				options = append(options, f[1:]...)
			}
		}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		servers = append(servers, dc.Nameservers...)
		search = append(search, dc.Searches...)
		for _, o := range dc.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			options = slicesDeleteOption(options, o.Name)
			options = append(options, opt)
		}
	}
	var b strings.Builder
	if len(search) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(search, " "))
	}
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(options, " "))
	}
	return b.String()
}

// slicesDeleteOption drops a resolver option by name (a pod's dnsConfig overrides it).
func slicesDeleteOption(opts []string, name string) []string {
	out := opts[:0]
	for _, o := range opts {
		if n, _, _ := strings.Cut(o, ":"); n != name {
			out = append(out, o)
		}
	}
	return out
}

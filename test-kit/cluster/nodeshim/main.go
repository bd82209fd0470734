// Command nodeshim emulates one Kubernetes node for prober's tests: flags and the two entry points.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// config is everything `nodeshim run` is told on its command line.
type config struct {
	name, kubeconfig string
	addresses        []net.IP
	listen           string
	tlsCert, tlsKey  string
	clientCA         string
	podCIDRs         []string
	sandboxes        []*sandbox
	nodeNetns        string
	hostRoot         string
	images           map[string]string // image reference -> directory holding its binaries
	entrypoints      map[string]string // image reference -> ENTRYPOINT argv0
	labels           map[string]string
	taints           []v1.Taint
	cpu, memory      resource.Quantity
	pods             int
	stateDir         string
	clusterDNS       string
	kubeletPort      int32
}

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	// mount-exec must stay on one OS thread: unshare(2) and execve(2) act on the calling thread.
	runtime.LockOSThread()
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCommand(os.Args[2:])
	case "reaper":
		err = reaper(os.Args[2:])
	case "mount-exec":
		err = mountExec(os.Args[2:]) // returns only on failure
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nodeshim %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: nodeshim run --name NODE --kubeconfig PATH ... | nodeshim mount-exec ... -- ARGV")
	os.Exit(2)
}

func parseRunFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c := &config{images: map[string]string{}, entrypoints: map[string]string{}, labels: map[string]string{}}
	var addresses, podCIDRs, sandboxes, images, entrypoints, labels, taints listFlag
	var cpu, memory string
	var verbosity int
	fs.StringVar(&c.name, "name", "", "node name")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of user system:node:NODE")
	fs.Var(&addresses, "address", "node IP (repeatable; first IPv4 and first IPv6 become InternalIPs)")
	fs.StringVar(&c.listen, "listen", "", "kubelet API listener IP:PORT (TLS)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "kubelet API serving certificate")
	fs.StringVar(&c.tlsKey, "tls-key", "", "kubelet API serving key")
	fs.StringVar(&c.clientCA, "client-ca", "", "optional: require kubelet API clients to present a certificate signed by this CA")
	fs.Var(&podCIDRs, "pod-cidr", "pod CIDR (repeatable)")
	fs.Var(&sandboxes, "sandbox", "pod network namespace NETNS=IP[,IP6] (repeatable)")
	fs.StringVar(&c.nodeNetns, "node-netns", "", "the node's own network namespace name")
	fs.StringVar(&c.hostRoot, "host-root", "/", "the node's root directory (hostPath volumes resolve under it)")
	fs.Var(&images, "image", "IMAGE=DIR (repeatable)")
	fs.Var(&entrypoints, "entrypoint", "IMAGE=ARGV0 (repeatable)")
	fs.Var(&labels, "label", "node label k=v (repeatable)")
	fs.Var(&taints, "taint", "node taint key[=value]:Effect (repeatable)")
	fs.StringVar(&cpu, "cpu", "2", "cpu capacity")
	fs.StringVar(&memory, "memory", "4Gi", "memory capacity")
	fs.IntVar(&c.pods, "pods", 110, "pod capacity")
	fs.StringVar(&c.stateDir, "state-dir", "", "directory for everything the shim writes")
	fs.StringVar(&c.clusterDNS, "cluster-dns", "", "cluster DNS server IP for dnsPolicy ClusterFirst*")
	fs.IntVar(&verbosity, "v", 0, "log verbosity")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	kfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(kfs)
	_ = kfs.Set("v", strconv.Itoa(verbosity))

	for name, v := range map[string]string{"--name": c.name, "--kubeconfig": c.kubeconfig, "--listen": c.listen, "--tls-cert": c.tlsCert, "--tls-key": c.tlsKey, "--state-dir": c.stateDir} {
		if v == "" {
			return nil, fmt.Errorf("%s is required", name)
		}
	}
	for _, a := range addresses {
		ip := net.ParseIP(a)
		if ip == nil {
			return nil, fmt.Errorf("--address %q: not an IP", a)
		}
		c.addresses = append(c.addresses, ip)
	}
	if len(c.addresses) == 0 {
		return nil, fmt.Errorf("--address is required")
	}
	_, port, err := net.SplitHostPort(c.listen)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("--listen port: %w", err)
	}
	c.kubeletPort = int32(p)
	for _, cidr := range podCIDRs {
		if _, _, err := net.ParseCIDR(cidr); err != nil {
			return nil, fmt.Errorf("--pod-cidr: %w", err)
		}
		c.podCIDRs = append(c.podCIDRs, cidr)
	}
	for _, s := range sandboxes {
		sb, err := parseSandbox(s)
		if err != nil {
			return nil, err
		}
		c.sandboxes = append(c.sandboxes, sb)
	}
	if err := splitPairs(images, "--image", c.images); err != nil {
		return nil, err
	}
	if err := splitPairs(entrypoints, "--entrypoint", c.entrypoints); err != nil {
		return nil, err
	}
	if err := splitPairs(labels, "--label", c.labels); err != nil {
		return nil, err
	}
	for _, t := range taints {
		taint, err := parseTaint(t)
		if err != nil {
			return nil, err
		}
		c.taints = append(c.taints, taint)
	}
	if c.cpu, err = resource.ParseQuantity(cpu); err != nil {
		return nil, fmt.Errorf("--cpu: %w", err)
	}
	if c.memory, err = resource.ParseQuantity(memory); err != nil {
		return nil, fmt.Errorf("--memory: %w", err)
	}
	if c.clusterDNS != "" && net.ParseIP(c.clusterDNS) == nil {
		return nil, fmt.Errorf("--cluster-dns %q: not an IP", c.clusterDNS)
	}
	return c, nil
}

// splitPairs parses repeated KEY=VALUE flags into m.
func splitPairs(list []string, flagName string, m map[string]string) error {
	for _, s := range list {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return fmt.Errorf("%s %q: want KEY=VALUE", flagName, s)
		}
		m[k] = v
	}
	return nil
}

// parseTaint parses key[=value]:Effect.
func parseTaint(s string) (v1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return v1.Taint{}, fmt.Errorf("--taint %q: want key[=value]:Effect", s)
	}
	k, v, _ := strings.Cut(kv, "=")
	switch e := v1.TaintEffect(effect); e {
	case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		return v1.Taint{Key: k, Value: v, Effect: e}, nil
	}
	return v1.Taint{}, fmt.Errorf("--taint %q: unknown effect %q", s, effect)
}

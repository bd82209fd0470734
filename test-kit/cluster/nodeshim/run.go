// Container processes: what a container is made of (argv, env, mounts, ids) and how it is started.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
)

// bind is one mount of a host path into a container.
type bind struct {
	src, dst string
	ro       bool
}

// launchSpec is everything needed to start one container instance.
type launchSpec struct {
	netns    string // "" = the shim's own namespace
	rootfs   string // empty mount point under the state dir
	binds    []bind
	uid, gid int64
	groups   []int64
	roRoot   bool
	hostname string // set in a private UTS namespace
	workdir  string
	argv     []string
	env      []string
	logPath  string
	termPath string // host file behind terminationMessagePath
}

// process is one started container instance.
type process struct {
	pid                   int
	env                   []string
	uid, gid              int64
	startedAt, finishedAt time.Time
	exited                chan struct{}
	ws                    syscall.WaitStatus
}

// exitCode is the shell-style code: the exit status, or 128+signal.
func (p *process) exitCode() int {
	if p.ws.Signaled() {
		return 128 + int(p.ws.Signal())
	}
	return p.ws.ExitStatus()
}

func (p *provider) logPath(pod *v1.Pod, ctr string, previous bool) string {
	name := fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, ctr)
	if previous {
		name += ".previous"
	}
	return filepath.Join(p.cfg.stateDir, "logs", name+".log")
}

func (r *podRuntime) launchSpec(ctx context.Context, cs *ctrState, imageDir string) (*launchSpec, error) {
	pod := r.podCopy()
	c := &cs.spec
	env, err := r.containerEnv(ctx, pod, c)
	if err != nil {
		return nil, err
	}
	lookup := envLookup(env)
	var argv []string
	switch {
	case len(c.Command) > 0:
		argv = append(append(argv, c.Command...), c.Args...)
	case r.p.entrypoint(c.Image) != "":
		argv = append([]string{r.p.entrypoint(c.Image)}, c.Args...)
	default:
		argv = append(argv, c.Args...)
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command specified for container %q (image %q has no known entrypoint)", c.Name, c.Image)
	}
	for i := range argv {
		argv[i] = expandVars(argv[i], lookup)
	}

	r.mu.Lock()
	netns := r.p.cfg.nodeNetns
	if r.sb != nil {
		netns = r.sb.netns
	}
	podIPs := r.podIPs
	volumes := r.volumes
	first := cs.instances == 0
	cs.instances++
	r.mu.Unlock()

	etc, err := r.writeEtcFiles(pod, podIPs)
	if err != nil {
		return nil, err
	}
	ls := &launchSpec{
		netns:   netns,
		rootfs:  filepath.Join(r.p.cfg.stateDir, "rootfs", string(r.uid), c.Name),
		argv:    argv,
		env:     env,
		workdir: c.WorkingDir,
		logPath: r.p.logPath(pod, c.Name, false),
	}
	// The node's hostname for hostNetwork pods: the machine's own is not the emulated node's.
	ls.hostname = r.p.cfg.name
	if !pod.Spec.HostNetwork {
		ls.hostname = podHostname(pod)
	}
	ls.uid, ls.gid, ls.groups, ls.roRoot = securityIDs(pod, c)

	ls.binds = append(ls.binds, bind{src: imageDir, dst: "/usr/local/bin", ro: true})
	for _, name := range []string{"hosts", "hostname", "resolv.conf"} {
		ls.binds = append(ls.binds, bind{src: filepath.Join(etc, name), dst: "/etc/" + name})
	}
	if c.TerminationMessagePath != "" {
		ls.termPath = filepath.Join(r.dir, "termination", c.Name)
		if err := writeFileAtomic(ls.termPath, nil, 0o666, -1); err != nil {
			return nil, err
		}
		ls.binds = append(ls.binds, bind{src: ls.termPath, dst: c.TerminationMessagePath})
	}
	for _, vm := range c.VolumeMounts {
		src, ok := volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volume %q of mount %q is not set up", vm.Name, vm.MountPath)
		}
		if vm.SubPath != "" {
			if src, err = subPath(src, vm.SubPath); err != nil {
				return nil, err
			}
		}
		ls.binds = append(ls.binds, bind{src: src, dst: vm.MountPath, ro: vm.ReadOnly || r.isAtomicVolume(vm.Name)})
	}
	// Parents before children, so /data/x is not hidden by a later /data.
	sort.SliceStable(ls.binds, func(i, j int) bool {
		return strings.Count(filepath.Clean(ls.binds[i].dst), "/") < strings.Count(filepath.Clean(ls.binds[j].dst), "/")
	})

	if err := os.MkdirAll(ls.rootfs, 0o755); err != nil {
		return nil, err
	}
	if first {
		_ = os.Remove(r.p.logPath(pod, c.Name, true))
		_ = os.Remove(ls.logPath) // a former pod of the same name
	} else {
		_ = os.Rename(ls.logPath, r.p.logPath(pod, c.Name, true))
	}
	return ls, nil
}

// subPath resolves a volumeMount subPath inside a volume, creating it as a directory if
// missing, as the kubelet does.
func subPath(vol, sub string) (string, error) {
	clean := filepath.Clean(sub)
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("subPath %q must be a relative path inside the volume", sub)
	}
	p := filepath.Join(vol, clean)
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return "", err
		}
	}
	return p, nil
}

// securityIDs are the user, group and supplementary groups a container runs as.
func securityIDs(pod *v1.Pod, c *v1.Container) (uid, gid int64, groups []int64, roRoot bool) {
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			uid = *psc.RunAsUser
		}
		if psc.RunAsGroup != nil {
			gid = *psc.RunAsGroup
		}
		groups = append(groups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			groups = append(groups, *psc.FSGroup)
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
		roRoot = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	}
	return uid, gid, groups, roRoot
}

// entrypoint is the ENTRYPOINT given with --entrypoint for an image, if any.
func (p *provider) entrypoint(image string) string {
	want := normalizeImage(image)
	for name, ep := range p.cfg.entrypoints {
		if normalizeImage(name) == want {
			return ep
		}
	}
	return ""
}

// startProcess starts a container as `ip netns exec NETNS <self> mount-exec ... -- ARGV`.
// mount-exec reports on fd 3: "+" once it runs, then an error text if it fails before its
// execve; close-on-exec closes the pipe on success. So "" means ip itself failed.
func (p *provider) startProcess(ls *launchSpec) (*process, error) {
	args := []string{"mount-exec", "--status-fd", "3", "--rootfs", ls.rootfs,
		"--uid", strconv.FormatInt(ls.uid, 10), "--gid", strconv.FormatInt(ls.gid, 10)}
	if len(ls.groups) > 0 {
		var g []string
		for _, x := range ls.groups {
			g = append(g, strconv.FormatInt(x, 10))
		}
		args = append(args, "--groups", strings.Join(g, ","))
	}
	if ls.roRoot {
		args = append(args, "--ro-root")
	}
	if ls.hostname != "" {
		args = append(args, "--hostname", ls.hostname)
	}
	if ls.workdir != "" {
		args = append(args, "--workdir", ls.workdir)
	}
	for _, b := range ls.binds {
		spec := b.src + ":" + b.dst
		if b.ro {
			spec += ":ro"
		}
		args = append(args, "--bind", spec)
	}
	args = append(append(args, "--"), ls.argv...)

	var cmd *exec.Cmd
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if ls.netns != "" {
		// ip netns exec also gives the process a private (slave) mount namespace.
		cmd = exec.Command(p.ipPath, append([]string{"netns", "exec", ls.netns, p.self}, args...)...)
	} else {
		cmd = exec.Command(p.self, args...)
		attr.Unshareflags = syscall.CLONE_NEWNS // Go makes / private in the child
	}
	cmd.SysProcAttr = attr
	cmd.Env = ls.env
	logf, err := os.OpenFile(ls.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer statusR.Close()
	cmd.ExtraFiles = []*os.File{statusW}
	err = cmd.Start()
	statusW.Close()
	if err != nil {
		return nil, fmt.Errorf("failed to start container process: %w", err)
	}
	proc := &process{pid: cmd.Process.Pid, env: ls.env, uid: ls.uid, gid: ls.gid, startedAt: time.Now(), exited: make(chan struct{})}
	p.trackGroup(proc.pid)
	go func() {
		_ = cmd.Wait()
		p.endGroup(proc.pid)
		proc.ws = cmd.ProcessState.Sys().(syscall.WaitStatus)
		proc.finishedAt = time.Now()
		close(proc.exited)
	}()
	msg, _ := io.ReadAll(statusR)
	switch {
	case len(msg) == 0:
		<-proc.exited
		return nil, fmt.Errorf("failed to enter network namespace %q: %s", ls.netns, lastLine(ls.logPath))
	case len(msg) > 1:
		<-proc.exited
		return nil, fmt.Errorf("failed to start container process: %s", msg[1:])
	}
	return proc, nil
}

// lastLine is the last non-empty line of a file (the reason a helper tool printed).
func lastLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// terminationMessage is what the kubelet reports in terminated.message: the file at
// terminationMessagePath, or with FallbackToLogsOnError the log tail of a failed container.
func (r *podRuntime) terminationMessage(cs *ctrState, ls *launchSpec, code int) string {
	if ls.termPath != "" {
		if b, err := readHead(ls.termPath, 4096); err == nil && len(b) > 0 {
			return string(b)
		}
	}
	if code == 0 || cs.spec.TerminationMessagePolicy != v1.TerminationMessageFallbackToLogsOnError {
		return ""
	}
	b, _ := os.ReadFile(ls.logPath)
	return string(logTail(b, 80, 2048))
}

func readHead(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

// logTail is the last lines of a log, at most maxBytes of them.
func logTail(b []byte, lines, maxBytes int) []byte {
	if lines >= 0 {
		end := len(b)
		if end > 0 && b[end-1] == '\n' {
			end--
		}
		n := 0
		start := 0
		for i := end - 1; i >= 0; i-- {
			if b[i] == '\n' {
				n++
				if n == lines {
					start = i + 1
					break
				}
			}
		}
		if lines == 0 {
			start = len(b)
		}
		b = b[start:]
	}
	if maxBytes >= 0 && len(b) > maxBytes {
		b = b[len(b)-maxBytes:]
	}
	return bytes.Clone(b)
}

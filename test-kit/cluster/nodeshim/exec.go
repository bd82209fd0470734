// The kubelet API's streaming side: exec in a running container (nsenter) and container logs.
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	utilexec "k8s.io/utils/exec"
)

// container finds a container's state by name.
func (r *podRuntime) container(name string) *ctrState {
	for _, cs := range append(append([]*ctrState{}, r.inits...), r.ctrs...) {
		if cs.spec.Name == name {
			return cs
		}
	}
	return nil
}

// running is the container's current instance, or an error saying why there is none.
func (p *provider) running(namespace, pod, container string) (*podRuntime, *ctrState, *process, error) {
	r := p.get(namespace, pod)
	if r == nil {
		return nil, nil, nil, notFound(namespace, pod)
	}
	cs := r.container(container)
	if cs == nil {
		return nil, nil, nil, errdefs.NotFoundf("container %q not found in pod %s/%s", container, namespace, pod)
	}
	r.mu.Lock()
	proc := cs.proc
	r.mu.Unlock()
	if proc == nil {
		return nil, nil, nil, errdefs.InvalidInputf("container %q in pod %s/%s is not running", container, namespace, pod)
	}
	return r, cs, proc, nil
}

// RunInContainer execs a command in the container with nsenter. A non-zero exit is returned
// as a utilexec.CodeExitError, which virtual-kubelet's ServeExec turns into the kubelet's
// NonZeroExitCode status, so the client gets the exit code.
func (p *provider) RunInContainer(ctx context.Context, namespace, pod, container string, argv []string, attach api.AttachIO) error {
	_, _, proc, err := p.running(namespace, pod, container)
	if err != nil {
		return err
	}
	if len(argv) == 0 {
		return errdefs.InvalidInput("no command given")
	}
	klog.Infof("exec in %s/%s/%s: %q", namespace, pod, container, argv)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := p.nsenterCmd(ctx, proc, argv)

	var stdout io.Writer
	if attach.Stdout() != nil {
		stdout = attach.Stdout()
		if n := p.faults.execCut.Load(); n >= 0 {
			holder, _ := ctx.Value(connKey{}).(*connHolder)
			stdout = &cutWriter{w: stdout, left: n, holder: holder, cancel: cancel}
		}
	}
	if attach.TTY() {
		err = runWithTTY(cmd, attach, stdout)
	} else {
		err = runWithPipes(cmd, attach, stdout)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws := ee.Sys().(syscall.WaitStatus)
		code := ws.ExitStatus()
		if ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
		if code != 0 {
			return utilexec.CodeExitError{Err: err, Code: code}
		}
		return nil
	}
	return err
}

// runWithPipes wires stdin/stdout/stderr through pipes. exec.Cmd.Wait returns only after
// stdout and stderr are copied to the end, so all output is flushed before the exit status.
// Stdin is copied apart: a client that never closes it must not hold the exec open.
func runWithPipes(cmd *exec.Cmd, attach api.AttachIO, stdout io.Writer) error {
	cmd.Stdout = stdout
	if attach.Stderr() != nil {
		cmd.Stderr = attach.Stderr()
	}
	if in := attach.Stdin(); in != nil {
		w, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		go func() {
			_, _ = io.Copy(w, in)
			_ = w.Close()
		}()
	}
	return cmd.Run()
}

// runWithTTY runs the command on a new pseudo-terminal.
func runWithTTY(cmd *exec.Cmd, attach api.AttachIO, stdout io.Writer) error {
	master, slave, err := openPTY()
	if err != nil {
		return err
	}
	defer master.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr.Setpgid = false // Setsid makes it a group leader
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0
	err = cmd.Start()
	slave.Close()
	if err != nil {
		return err
	}
	if in := attach.Stdin(); in != nil {
		go func() { _, _ = io.Copy(master, in) }()
	}
	go func() {
		for size := range attach.Resize() {
			_ = unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Height, Col: size.Width})
		}
	}()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		if stdout != nil {
			_, _ = io.Copy(stdout, master) // ends with EIO once the terminal has no process
		}
	}()
	err = cmd.Wait()
	select { // drain what the command wrote last, unless a background job keeps the terminal open
	case <-copied:
	case <-time.After(2 * time.Second):
	}
	return err
}

func openPTY() (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	return master, slave, nil
}

// cutWriter is the exec-cut fault: after `left` bytes of stdout it drops the connection.
type cutWriter struct {
	w      io.Writer
	left   int64
	holder *connHolder
	cancel context.CancelFunc
	once   sync.Once
}

var errExecCut = errors.New("nodeshim fault exec-cut: connection dropped")

func (c *cutWriter) Write(b []byte) (int, error) {
	if int64(len(b)) <= c.left {
		n, err := c.w.Write(b)
		c.left -= int64(n)
		return n, err
	}
	n, _ := c.w.Write(b[:c.left])
	c.left = 0
	c.once.Do(func() {
		klog.Infof("fault exec-cut: dropping the exec connection after its stdout bytes")
		time.Sleep(100 * time.Millisecond) // let the bytes already written leave
		if c.holder != nil {
			c.holder.drop()
		}
		c.cancel() // and stop the command
	})
	return n, errExecCut
}

// GetContainerLogs serves a container's log file (tail, limitBytes, previous, follow).
func (p *provider) GetContainerLogs(ctx context.Context, namespace, pod, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	r := p.get(namespace, pod)
	if r == nil {
		return nil, notFound(namespace, pod)
	}
	cs := r.container(container)
	if cs == nil {
		return nil, errdefs.NotFoundf("container %q not found in pod %s/%s", container, namespace, pod)
	}
	path := p.logPath(r.podCopy(), container, opts.Previous)
	f, err := os.Open(path)
	if err != nil {
		if opts.Previous {
			return nil, errdefs.InvalidInputf("previous terminated container %q in pod %q not found", container, pod)
		}
		r.mu.Lock()
		reason := ""
		if cs.state.Waiting != nil {
			reason = cs.state.Waiting.Reason
		}
		r.mu.Unlock()
		return nil, errdefs.InvalidInputf("container %q in pod %q is waiting to start: %s", container, pod, reason)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	offset := int64(len(data))
	tail := -1
	if opts.Tail > 0 {
		tail = opts.Tail
	}
	data = logTail(data, tail, -1)
	limit := -1
	if opts.LimitBytes > 0 {
		limit = opts.LimitBytes
	}
	if !opts.Follow || opts.Previous {
		if limit >= 0 && len(data) > limit {
			data = data[:limit]
		}
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	pr, pw := io.Pipe()
	go followLog(ctx, r, cs, path, data, offset, pw)
	return pr, nil
}

// followLog streams what is written to the log after data, until the instance ends.
func followLog(ctx context.Context, r *podRuntime, cs *ctrState, path string, data []byte, offset int64, pw *io.PipeWriter) {
	r.mu.Lock()
	proc := cs.proc
	r.mu.Unlock()
	if _, err := pw.Write(data); err != nil {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		pw.CloseWithError(err)
		return
	}
	defer f.Close()
	buf := make([]byte, 32*1024)
	for {
		n, _ := f.ReadAt(buf, offset)
		if n > 0 {
			offset += int64(n)
			if _, err := pw.Write(buf[:n]); err != nil {
				return
			}
			continue
		}
		ended := proc == nil
		if proc != nil {
			select {
			case <-proc.exited:
				ended = true
			default:
			}
		}
		if ended {
			if n, _ := f.ReadAt(buf, offset); n > 0 {
				continue
			}
			pw.Close()
			return
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			pw.Close()
			return
		}
	}
}

// mount-exec: builds a container's root (inside the private mount namespace `ip netns exec` made) and execs it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// mountExec returns only on failure; the error goes to the status fd and stderr (the log).
func mountExec(args []string) error {
	fs := flag.NewFlagSet("mount-exec", flag.ContinueOnError)
	var binds listFlag
	var rootfs, groups, hostname, workdir string
	var uid, gid, statusFd int
	var roRoot bool
	fs.StringVar(&rootfs, "rootfs", "", "empty directory to build the root in")
	fs.Var(&binds, "bind", "SRC:DST[:ro] (repeatable)")
	fs.IntVar(&uid, "uid", 0, "user id")
	fs.IntVar(&gid, "gid", 0, "group id")
	fs.StringVar(&groups, "groups", "", "supplementary group ids, comma-separated")
	fs.BoolVar(&roRoot, "ro-root", false, "read-only root filesystem")
	fs.StringVar(&hostname, "hostname", "", "hostname in a private UTS namespace")
	fs.StringVar(&workdir, "workdir", "", "working directory")
	fs.IntVar(&statusFd, "status-fd", -1, "fd to report start-up failures on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var status *os.File
	if statusFd >= 0 {
		status = os.NewFile(uintptr(statusFd), "status")
		syscall.CloseOnExec(statusFd)
		_, _ = status.WriteString("+")
	}
	err := func() error {
		if fs.NArg() == 0 || rootfs == "" {
			return errors.New("want --rootfs DIR ... -- ARGV")
		}
		var gs []int
		for _, g := range strings.Split(groups, ",") {
			if g == "" {
				continue
			}
			n, err := strconv.Atoi(g)
			if err != nil {
				return fmt.Errorf("--groups: %w", err)
			}
			gs = append(gs, n)
		}
		var bs []bind
		for _, b := range binds {
			parts := strings.Split(b, ":")
			if len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "ro") {
				return fmt.Errorf("--bind %q: want SRC:DST[:ro]", b)
			}
			bs = append(bs, bind{src: parts[0], dst: parts[1], ro: len(parts) == 3})
		}
		root, err := buildRoot(rootfs, bs, roRoot)
		if err != nil {
			return err
		}
		if hostname != "" {
			if err := unix.Unshare(unix.CLONE_NEWUTS); err != nil {
				return fmt.Errorf("unshare uts: %w", err)
			}
			if err := unix.Sethostname([]byte(hostname)); err != nil {
				return fmt.Errorf("sethostname: %w", err)
			}
		}
		return enter(root, workdir, uid, gid, gs, fs.Args())
	}()
	if status != nil {
		_, _ = status.WriteString(err.Error())
	}
	fmt.Fprintf(os.Stderr, "nodeshim mount-exec: %v\n", err)
	os.Exit(127)
	return err
}

// buildRoot makes the container's root: a tmpfs holding the host's system directories
// read-only, /etc as an overlay (host /etc below, tmpfs above: writable and room for mount
// points, nothing reaches the host), a runtime-like /dev, /proc and /sys of this network
// namespace, private /tmp and /run, then the binds. Its layout: <rootfs>/root is the root,
// <rootfs>/etc-upper and etc-work the overlay's, outside the container's view.
func buildRoot(rootfs string, binds []bind, roRoot bool) (string, error) {
	if err := unix.Mount("tmpfs", rootfs, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return "", fmt.Errorf("mount tmpfs on %s: %w", rootfs, err)
	}
	root := filepath.Join(rootfs, "root")
	for _, d := range []string{root, filepath.Join(rootfs, "etc-upper"), filepath.Join(rootfs, "etc-work")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", err
		}
	}
	for _, d := range []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"} {
		host := "/" + d
		fi, err := os.Lstat(host)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 { // merged /usr: bin -> usr/bin
			target, err := os.Readlink(host)
			if err != nil {
				return "", err
			}
			if err := os.Symlink(target, filepath.Join(root, d)); err != nil {
				return "", err
			}
			continue
		}
		if err := bindMount(host, filepath.Join(root, d), true, true); err != nil {
			return "", err
		}
	}
	etc := filepath.Join(root, "etc")
	if err := os.Mkdir(etc, 0o755); err != nil {
		return "", err
	}
	opts := fmt.Sprintf("lowerdir=/etc,upperdir=%s/etc-upper,workdir=%s/etc-work", rootfs, rootfs)
	if err := unix.Mount("overlay", etc, "overlay", 0, opts); err != nil {
		return "", fmt.Errorf("mount overlay on /etc: %w", err)
	}
	if err := buildDev(filepath.Join(root, "dev")); err != nil {
		return "", err
	}
	for _, d := range []string{"proc", "sys"} {
		if err := bindMount("/"+d, filepath.Join(root, d), true, true); err != nil {
			return "", err
		}
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{"tmp", 0o1777}, {"run", 0o755}, {"var", 0o755}, {"root", 0o700}} {
		p := filepath.Join(root, d.path)
		if err := os.Mkdir(p, d.mode); err != nil {
			return "", err
		}
		if err := os.Chmod(p, d.mode); err != nil { // umask
			return "", err
		}
		if (d.path == "tmp" || d.path == "run") && !roRoot {
			if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("mode=%o", d.mode)); err != nil {
				return "", fmt.Errorf("mount tmpfs on /%s: %w", d.path, err)
			}
		}
	}
	for _, b := range binds {
		target, err := resolveIn(root, b.dst)
		if err != nil {
			return "", err
		}
		if err := bindMount(b.src, target, true, b.ro); err != nil {
			return "", fmt.Errorf("mount %s on %s: %w", b.src, b.dst, err)
		}
	}
	if roRoot {
		for _, m := range []string{rootfs, etc} {
			if err := makeReadOnly(m, false); err != nil {
				return "", err
			}
		}
	}
	return root, nil
}

// buildDev makes /dev as container runtimes do: a tmpfs with the basic devices bound from
// the host, the host's ptys, a private /dev/shm and the usual symlinks.
func buildDev(dev string) error {
	if err := os.Mkdir(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_STRICTATIME, "mode=0755,size=65536k"); err != nil {
		return fmt.Errorf("mount tmpfs on /dev: %w", err)
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		if err := bindMount("/dev/"+d, filepath.Join(dev, d), false, false); err != nil {
			return err
		}
	}
	if err := bindMount("/dev/pts", filepath.Join(dev, "pts"), true, false); err != nil {
		return err
	}
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("shm", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size=65536k"); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	for name, target := range map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return nil
}

// bindMount binds src on target, creating target as a directory or an empty file to match.
func bindMount(src, target string, recursive, ro bool) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("mount point: %w", err)
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("mount point: %w", err)
		}
		f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			return fmt.Errorf("mount point: %w", err)
		}
		f.Close()
	}
	flags := uintptr(unix.MS_BIND)
	if recursive {
		flags |= unix.MS_REC
	}
	if err := unix.Mount(src, target, "", flags, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, target, err)
	}
	if ro {
		return makeReadOnly(target, recursive)
	}
	return nil
}

// makeReadOnly makes a mount (and with recursive its submounts) read-only, keeping its other flags.
func makeReadOnly(target string, recursive bool) error {
	flags := 0
	if recursive {
		flags = unix.AT_RECURSIVE
	}
	err := unix.MountSetattr(-1, target, uint(flags), &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	if errors.Is(err, unix.ENOSYS) { // kernel before 5.12
		err = unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, "")
	}
	if err != nil {
		return fmt.Errorf("read-only %s: %w", target, err)
	}
	return nil
}

// resolveIn is where path lies inside root, following symlinks as if root were "/", so a
// mount never lands outside the container's root.
func resolveIn(root, path string) (string, error) {
	parts := strings.Split(path, "/")
	cur := "/"
	for hops := 0; len(parts) > 0; {
		part := parts[0]
		parts = parts[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many symlinks", path)
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			cur = "/"
		}
		parts = append(strings.Split(target, "/"), parts...)
	}
	return filepath.Join(root, cur), nil
}

// enter chroots, takes the container's identity and execs its program.
func enter(root, workdir string, uid, gid int, groups []int, argv []string) error {
	ppid := os.Getppid()
	if err := unix.Chroot(root); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	if workdir == "" {
		workdir = "/"
	}
	if err := os.MkdirAll(workdir, 0o755); err != nil && !errors.Is(err, unix.EROFS) {
		return fmt.Errorf("working directory %s: %w", workdir, err)
	}
	if err := unix.Chdir(workdir); err != nil {
		return fmt.Errorf("chdir %s: %w", workdir, err)
	}
	if err := syscall.Setgroups(append([]int{gid}, groups...)); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("setgid: %w", err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("setuid: %w", err)
	}
	// After the credential change, which clears it: the container dies with the shim.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("pdeathsig: %w", err)
	}
	if os.Getppid() != ppid {
		return errors.New("the shim is gone")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	return syscall.Exec(path, argv, os.Environ())
}

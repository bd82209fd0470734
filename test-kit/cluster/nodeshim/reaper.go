// Nothing outlives the shim: container process groups are recorded in pid files, and a reaper kills them if the shim dies.
package main

import (
	"flag"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"k8s.io/klog/v2"
)

// Pdeathsig only reaches a container's first process. Its children (a shell's, say) would
// survive a SIGKILLed shim, so every container process group gets a pid file, and the
// reaper, a child that hears of the shim's death by SIGTERM (its own pdeathsig), kills them.

func pidDir(stateDir string) string { return filepath.Join(stateDir, "pids") }

// trackGroup records a container's process group.
func (p *provider) trackGroup(pgid int) {
	path := filepath.Join(pidDir(p.cfg.stateDir), strconv.Itoa(pgid))
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		klog.Warningf("pid file %s: %v", path, err)
	}
}

// endGroup kills what is left of a container's process group once its first process has
// exited (a container's processes end with it) and forgets the group.
func (p *provider) endGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	_ = os.Remove(filepath.Join(pidDir(p.cfg.stateDir), strconv.Itoa(pgid)))
}

// startReaper starts `nodeshim reaper`. Call it from the main goroutine: pdeathsig fires when
// the forking thread exits, and main's thread lives as long as the process.
func startReaper(self, stateDir string) error {
	if err := os.MkdirAll(pidDir(stateDir), 0o755); err != nil {
		return err
	}
	cmd := exec.Command(self, "reaper", "--state-dir", stateDir, "--parent", strconv.Itoa(os.Getpid()))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	return cmd.Start()
}

// reaper waits for SIGTERM (the shim is gone), kills every recorded process group and exits.
func reaper(args []string) error {
	fs := flag.NewFlagSet("reaper", flag.ContinueOnError)
	stateDir := fs.String("state-dir", "", "the shim's state directory")
	parent := fs.Int("parent", 0, "the shim's pid")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if os.Getppid() != *parent { // the shim died before we listened
		sigs <- syscall.SIGTERM
	}
	<-sigs
	entries, _ := os.ReadDir(pidDir(*stateDir))
	for _, e := range entries {
		if pgid, err := strconv.Atoi(e.Name()); err == nil && pgid > 1 {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			_ = os.Remove(filepath.Join(pidDir(*stateDir), e.Name()))
		}
	}
	return nil
}

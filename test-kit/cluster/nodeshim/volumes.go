// Pod volumes: hostPath checks, emptyDir, and configMap/secret/downwardAPI/projected (token) volumes rendered under the state dir.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// setUpVolumes prepares every volume, retrying (FailedMount events) until all succeed.
func (r *podRuntime) setUpVolumes(ctx context.Context) bool {
	for {
		pod := r.podCopy()
		vols := map[string]string{}
		var err error
		for i := range pod.Spec.Volumes {
			v := &pod.Spec.Volumes[i]
			var path string
			if path, err = r.setUpVolume(ctx, pod, v, true); err != nil {
				r.p.event(pod, v1.EventTypeWarning, "FailedMount", "MountVolume.SetUp failed for volume %q : %v", v.Name, err)
				break
			}
			vols[v.Name] = path
		}
		if err == nil {
			r.mu.Lock()
			r.volumes = vols
			r.mu.Unlock()
			return true
		}
		if !sleepCtx(ctx, 2*time.Second) {
			return false
		}
	}
}

// setUpVolume makes one volume and returns its host path. Rendered volumes are rewritten on
// every call (refresh); with withTokens false their token files are left alone.
func (r *podRuntime) setUpVolume(ctx context.Context, pod *v1.Pod, v *v1.Volume, withTokens bool) (string, error) {
	dir := filepath.Join(r.dir, "volumes", v.Name)
	switch {
	case v.HostPath != nil:
		return r.hostPath(v.HostPath)
	case v.EmptyDir != nil:
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return "", err
		}
		return dir, os.Chmod(dir, 0o777)
	case v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil:
		files, err := r.renderVolume(ctx, pod, v, withTokens)
		if err != nil {
			return "", err
		}
		return dir, writeVolume(dir, files, fsGroup(pod))
	}
	return "", errors.New("volume type not supported by nodeshim")
}

// isAtomicVolume tells volumes the kubelet always mounts read-only (it rewrites them).
func (r *podRuntime) isAtomicVolume(name string) bool {
	for _, v := range r.podCopy().Spec.Volumes {
		if v.Name == name {
			return v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil
		}
	}
	return false
}

// hostPath resolves a hostPath under the node's root and applies the kubelet's type check.
func (r *podRuntime) hostPath(hp *v1.HostPathVolumeSource) (string, error) {
	p := filepath.Join(r.p.cfg.hostRoot, hp.Path)
	typ := v1.HostPathUnset
	if hp.Type != nil {
		typ = *hp.Type
	}
	fi, err := os.Stat(p)
	exists := err == nil
	fail := func(what string) (string, error) {
		return "", fmt.Errorf("hostPath type check failed: %s is not a %s", hp.Path, what)
	}
	switch typ {
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			return p, os.MkdirAll(p, 0o755)
		}
		if !fi.IsDir() {
			return fail("directory")
		}
	case v1.HostPathDirectory:
		if !exists || !fi.IsDir() {
			return fail("directory")
		}
	case v1.HostPathFileOrCreate:
		if !exists {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return "", err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return "", err
			}
			return p, f.Close()
		}
		if !fi.Mode().IsRegular() {
			return fail("file")
		}
	case v1.HostPathFile:
		if !exists || !fi.Mode().IsRegular() {
			return fail("file")
		}
	case v1.HostPathSocket:
		if !exists || fi.Mode()&os.ModeSocket == 0 {
			return fail("socket file")
		}
	case v1.HostPathCharDev:
		if !exists || fi.Mode()&os.ModeCharDevice == 0 {
			return fail("character device")
		}
	case v1.HostPathBlockDev:
		if !exists || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
			return fail("block device")
		}
	}
	return p, nil
}

// volumeFile is one file of a rendered volume.
type volumeFile struct {
	data []byte
	mode os.FileMode
}

// renderVolume computes the files of a configMap, secret, downwardAPI or projected volume.
func (r *podRuntime) renderVolume(ctx context.Context, pod *v1.Pod, v *v1.Volume, withTokens bool) (map[string]volumeFile, error) {
	files := map[string]volumeFile{}
	mode := func(m *int32) os.FileMode {
		if m == nil {
			return 0o644
		}
		return os.FileMode(*m)
	}
	switch {
	case v.ConfigMap != nil:
		return files, r.configMapFiles(ctx, pod.Namespace, &v.ConfigMap.LocalObjectReference, v.ConfigMap.Items, v.ConfigMap.Optional, mode(v.ConfigMap.DefaultMode), files)
	case v.Secret != nil:
		ref := &v1.LocalObjectReference{Name: v.Secret.SecretName}
		return files, r.secretFiles(ctx, pod.Namespace, ref, v.Secret.Items, v.Secret.Optional, mode(v.Secret.DefaultMode), files)
	case v.DownwardAPI != nil:
		return files, r.downwardFiles(pod, v.DownwardAPI.Items, mode(v.DownwardAPI.DefaultMode), files)
	}
	def := mode(v.Projected.DefaultMode)
	for _, src := range v.Projected.Sources {
		var err error
		switch {
		case src.ConfigMap != nil:
			err = r.configMapFiles(ctx, pod.Namespace, &src.ConfigMap.LocalObjectReference, src.ConfigMap.Items, src.ConfigMap.Optional, def, files)
		case src.Secret != nil:
			err = r.secretFiles(ctx, pod.Namespace, &src.Secret.LocalObjectReference, src.Secret.Items, src.Secret.Optional, def, files)
		case src.DownwardAPI != nil:
			err = r.downwardFiles(pod, src.DownwardAPI.Items, def, files)
		case src.ServiceAccountToken != nil:
			var tok []byte
			if withTokens {
				var s string
				s, err = r.requestToken(ctx, pod, src.ServiceAccountToken)
				tok = []byte(s)
			} else { // keep the current token
				tok, err = os.ReadFile(filepath.Join(r.dir, "volumes", v.Name, src.ServiceAccountToken.Path))
			}
			files[src.ServiceAccountToken.Path] = volumeFile{data: tok, mode: def}
		default:
			err = errors.New("projected volume source not supported by nodeshim")
		}
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

func (r *podRuntime) configMapFiles(ctx context.Context, ns string, ref *v1.LocalObjectReference, items []v1.KeyToPath, optional *bool, mode os.FileMode, files map[string]volumeFile) error {
	cm, err := r.p.client.CoreV1().ConfigMaps(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		if optional != nil && *optional && isNotFound(err) {
			return nil
		}
		return err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyFiles("configmap", data, items, optional, mode, files)
}

func (r *podRuntime) secretFiles(ctx context.Context, ns string, ref *v1.LocalObjectReference, items []v1.KeyToPath, optional *bool, mode os.FileMode, files map[string]volumeFile) error {
	s, err := r.p.client.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		if optional != nil && *optional && isNotFound(err) {
			return nil
		}
		return err
	}
	return keyFiles("secret", s.Data, items, optional, mode, files)
}

// keyFiles maps configMap/secret keys to files: all keys, or the listed items.
func keyFiles(kind string, data map[string][]byte, items []v1.KeyToPath, optional *bool, mode os.FileMode, files map[string]volumeFile) error {
	if len(items) == 0 {
		for k, v := range data {
			files[k] = volumeFile{data: v, mode: mode}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional != nil && *optional {
				continue
			}
			if kind == "secret" {
				return fmt.Errorf("secret references non-existent secret key: %s", it.Key)
			}
			return fmt.Errorf("configmap references non-existent config key: %s", it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		files[it.Path] = volumeFile{data: v, mode: m}
	}
	return nil
}

func (r *podRuntime) downwardFiles(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, mode os.FileMode, files map[string]volumeFile) error {
	for _, it := range items {
		var val string
		var err error
		switch {
		case it.FieldRef != nil:
			val, err = r.fieldValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			val, err = r.resourceValue(pod, it.ResourceFieldRef)
		}
		if err != nil {
			return err
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		files[it.Path] = volumeFile{data: []byte(val), mode: m}
	}
	return nil
}

// requestToken gets a service account token bound to the pod (TokenRequest), as the kubelet's
// token manager does; the API's default audience when none is asked for.
func (r *podRuntime) requestToken(ctx context.Context, pod *v1.Pod, src *v1.ServiceAccountTokenProjection) (string, error) {
	exp := int64(3607)
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	tr := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		tr.Spec.Audiences = []string{src.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	res, err := r.p.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("failed to fetch token: %w", err)
	}
	ttl := time.Duration(exp) * time.Second
	if res.Spec.ExpirationSeconds != nil {
		ttl = time.Duration(*res.Spec.ExpirationSeconds) * time.Second
	}
	refresh := time.Now().Add(ttl * 8 / 10)
	r.mu.Lock()
	if r.tokenRefresh.IsZero() || refresh.Before(r.tokenRefresh) {
		r.tokenRefresh = refresh
	}
	r.mu.Unlock()
	klog.V(2).Infof("pod %s: token for %s/%s (audience %q), refresh at %s", r.key, pod.Namespace, sa, src.Audience, refresh.Format(time.RFC3339))
	return res.Status.Token, nil
}

// refreshVolumes rewrites rendered volumes every 30s (configMap/secret updates, as the
// kubelet's periodic sync) and renews tokens at 80% of their life.
func (r *podRuntime) refreshVolumes(ctx context.Context) {
	last := time.Now()
	for sleepCtx(ctx, time.Second) {
		r.mu.Lock()
		tokens := !r.tokenRefresh.IsZero() && time.Now().After(r.tokenRefresh)
		if tokens {
			r.tokenRefresh = time.Time{}
		}
		r.mu.Unlock()
		if !tokens && time.Since(last) < 30*time.Second {
			continue
		}
		last = time.Now()
		r.rerender(ctx, tokens)
	}
}

// refreshDownwardAPI rewrites rendered volumes now (labels or annotations changed).
func (r *podRuntime) refreshDownwardAPI() {
	r.mu.Lock()
	ready := r.volumes != nil && r.phase == ""
	r.mu.Unlock()
	if ready {
		r.rerender(r.ctx, false)
	}
}

func (r *podRuntime) rerender(ctx context.Context, withTokens bool) {
	pod := r.podCopy()
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.ConfigMap == nil && v.Secret == nil && v.DownwardAPI == nil && v.Projected == nil {
			continue
		}
		if _, err := r.setUpVolume(ctx, pod, v, withTokens); err != nil {
			klog.Warningf("pod %s: refreshing volume %s: %v", r.key, v.Name, err)
			if withTokens {
				r.mu.Lock()
				r.tokenRefresh = time.Now().Add(10 * time.Second) // try again soon
				r.mu.Unlock()
			}
		}
	}
}

// writeVolume writes a volume's files (each atomically, so a reader never sees half a file)
// and removes files of an earlier render that are gone.
func writeVolume(dir string, files map[string]volumeFile, gid int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, f := range files {
		clean := filepath.Clean(name)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("invalid file path %q", name)
		}
		if err := writeFileAtomic(filepath.Join(dir, clean), f.data, f.mode, gid); err != nil {
			return err
		}
	}
	var stale []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if _, ok := files[rel]; !ok && !strings.HasPrefix(d.Name(), ".tmp-") {
			stale = append(stale, p)
		}
		return nil
	})
	sort.Strings(stale)
	for _, p := range stale {
		_ = os.Remove(p)
	}
	return nil
}

// writeFileAtomic writes via a temporary file and rename; gid >= 0 sets group ownership (fsGroup).
func writeFileAtomic(path string, data []byte, mode os.FileMode, gid int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if gid >= 0 {
		if err := os.Chown(tmp.Name(), -1, int(gid)); err != nil {
			return err
		}
		mode |= 0o040
	}
	if err := os.Chmod(tmp.Name(), mode); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func fsGroup(pod *v1.Pod) int64 {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		return *sc.FSGroup
	}
	return -1
}

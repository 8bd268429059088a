package agent_test

import (
	"bufio"
	"fmt"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"sort"
	"strings"
	"testing"
	"time"
)

// watchPeak, when CALF_FOOTPRINT_PEAKPROFILE names a file, writes a heap
// profile there each time the live heap grows past its largest value so
// far by an eighth, so that the file ends holding the heap near its peak;
// the returned function stops the watch and logs the peak seen. Without
// the variable it does nothing.
func watchPeak(b *testing.B) (stop func()) {
	path := os.Getenv("CALF_FOOTPRINT_PEAKPROFILE")
	if path == "" {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	var peak uint64
	go func() {
		defer close(exited)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak+peak/8 {
				peak = v
				if f, err := os.Create(path); err == nil {
					_ = pprof.Lookup("heap").WriteTo(f, 0)
					f.Close()
				}
			}
		}
	}()
	return func() {
		close(done)
		<-exited
		b.Logf("peak of the live heap seen: %.1f MiB (profile in %s)", float64(peak)/(1<<20), path)
	}
}

// logFootprint logs, when CALF_FOOTPRINT_DETAIL is set, what the resident
// memory of the process is made of: the summary of /proc/self/smaps_rollup,
// the largest resident mappings of /proc/self/smaps, and the Go runtime's
// memory classes (runtime/metrics). Memory resident but outside the Go
// runtime's classes is SQLite's (modernc.org/libc allocates outside the Go
// heap).
func logFootprint(b *testing.B) {
	if os.Getenv("CALF_FOOTPRINT_DETAIL") == "" {
		return
	}
	if path := os.Getenv("CALF_FOOTPRINT_HEAPPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
				b.Log(err)
			}
			f.Close()
		}
	}
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.HasPrefix(line, "VmHWM:") || strings.HasPrefix(line, "RssAnon:") || strings.HasPrefix(line, "RssFile:") {
				b.Logf("%s", strings.Join(strings.Fields(line), " "))
			}
		}
	}
	if data, err := os.ReadFile("/proc/self/smaps_rollup"); err == nil {
		var keep []string
		for line := range strings.SplitSeq(string(data), "\n") {
			for _, k := range []string{"Rss:", "Anonymous:", "Private_Clean:", "Private_Dirty:", "Shared_Clean:", "Shared_Dirty:", "Swap:"} {
				if strings.HasPrefix(line, k) {
					keep = append(keep, strings.Join(strings.Fields(line), " "))
				}
			}
		}
		b.Logf("smaps_rollup: %s", strings.Join(keep, "; "))
	}
	type mapping struct {
		name      string
		rss, anon int64
	}
	var maps []mapping
	if f, err := os.Open("/proc/self/smaps"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) == 0 {
				continue
			}
			switch {
			case strings.Contains(fs[0], "-") && !strings.HasSuffix(fs[0], ":"):
				name := "[anon]"
				if len(fs) >= 6 {
					name = fs[5]
				}
				maps = append(maps, mapping{name: fs[0] + " " + name})
			case fs[0] == "Rss:" && len(maps) > 0:
				fmt.Sscan(fs[1], &maps[len(maps)-1].rss)
			case fs[0] == "Anonymous:" && len(maps) > 0:
				fmt.Sscan(fs[1], &maps[len(maps)-1].anon)
			}
		}
		f.Close()
	}
	sort.Slice(maps, func(i, j int) bool { return maps[i].rss > maps[j].rss })
	for _, m := range maps[:min(12, len(maps))] {
		b.Logf("mapping %s: RSS %d kB, anonymous %d kB", m.name, m.rss, m.anon)
	}
	names := []string{
		"/memory/classes/total:bytes",
		"/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/free:bytes",
		"/memory/classes/heap/released:bytes",
		"/memory/classes/heap/stacks:bytes",
		"/memory/classes/os-stacks:bytes",
		"/memory/classes/metadata/other:bytes",
		"/memory/classes/metadata/mspan/inuse:bytes",
		"/memory/classes/metadata/mcache/inuse:bytes",
		"/memory/classes/profiling/buckets:bytes",
		"/memory/classes/other:bytes",
		"/gc/heap/goal:bytes",
	}
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	metrics.Read(samples)
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			b.Logf("%s %.1f MiB", s.Name, float64(s.Value.Uint64())/(1<<20))
		}
	}
}

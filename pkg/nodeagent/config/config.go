// Package config is the node agent's configuration: the driver name, how
// each GPU is offered (whole, MIG partitions, shared) and health policy.
// It is read from a YAML file (see docs/nodeagent.md) and validated with
// errors that name the field.
package config

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gputopo/gputopo/pkg/contract"
	"github.com/gputopo/gputopo/pkg/strictyaml"
)

// Mode is how a GPU is offered.
type Mode string

const (
	// Whole publishes one device per GPU, one claim at a time.
	Whole Mode = "whole"
	// MIG publishes every real MIG placement as a device consuming the GPU's
	// shared counters (compute and memory slices); the whole GPU as a
	// device consuming all of them. Needs MIG mode on.
	MIG Mode = "mig"
	// Shared publishes one device per GPU that several claims can share
	// (allowMultipleAllocations), each taking memory and compute
	// capacity.
	Shared Mode = "shared"
)

// Config of the node agent.
type Config struct {
	// DriverName of the published slices and the kubelet plugin.
	DriverName string `json:"driverName"`
	// DefaultMode for GPUs no rule matches.
	DefaultMode Mode `json:"defaultMode"`
	// GPUs are rules choosing a mode; the first matching rule wins.
	GPUs []GPURule `json:"gpus,omitempty"`
	// Shared sets the request policy of shared GPUs.
	Shared SharedPolicy `json:"shared"`
	// Health decides which NVML events taint a device and for how long.
	Health HealthPolicy `json:"health"`
	// CliqueLabel writes the GPUs' multi-node NVLink clique as the node
	// label nvidia.com/gpu.clique, for schedulers that read topology from
	// node labels (the in-tree TopologyPlacementGenerator, Kueue, KAI).
	// The agent then needs to patch its node
	// (manifests/nodeagent-clique-label). Default false.
	CliqueLabel bool `json:"cliqueLabel,omitempty"`
}

// GPURule matches GPUs by product name substring and/or index.
type GPURule struct {
	Product string `json:"product,omitempty"`
	Indexes []int  `json:"indexes,omitempty"`
	Mode    Mode   `json:"mode"`
}

// SharedPolicy is the capacity request policy of shared GPUs.
type SharedPolicy struct {
	// MemoryStep: memory requests round up to a multiple of it.
	MemoryStep resource.Quantity `json:"memoryStep"`
	// DefaultMemory: what a share that asks for no memory takes.
	DefaultMemory resource.Quantity `json:"defaultMemory"`
	// DefaultComputePercent: compute a share takes when it asks for none,
	// in percent of the GPU's SMs.
	DefaultComputePercent int64 `json:"defaultComputePercent"`
}

// HealthPolicy maps NVML Xid errors to device taints and says when a
// taint is lifted.
type HealthPolicy struct {
	// IgnoredXids are application errors (the GPU is fine): no taint.
	IgnoredXids []uint64 `json:"ignoredXids,omitempty"`
	// FatalXids need a GPU reset: NoExecute, evicting running pods, and
	// lifted only after evidence of recovery (FatalRecovery). Other Xids
	// taint NoSchedule.
	FatalXids []uint64 `json:"fatalXids,omitempty"`
	// RecoverAfter: a taint is lifted when the GPU answers and has had no
	// error (no tainting Xid, no failed probe) for this long.
	RecoverAfter metav1.Duration `json:"recoverAfter"`
	// FlapThreshold and FlapWindow: a GPU tainted for the
	// FlapThreshold-th time within FlapWindow (counting each time it went
	// from untainted to tainted) is flapping, and that taint is lifted
	// only after FlapWindow without any error.
	FlapThreshold int             `json:"flapThreshold"`
	FlapWindow    metav1.Duration `json:"flapWindow"`
	// FatalRecovery is the evidence a fatal-Xid taint waits for.
	FatalRecovery FatalRecovery `json:"fatalRecovery"`
}

// FatalRecovery is what counts as evidence that a GPU recovered from a
// fatal Xid. An operator's acknowledgement always counts.
type FatalRecovery string

const (
	// RecoverOnReset lets a GPU reset seen through NVML count too.
	RecoverOnReset FatalRecovery = "reset"
	// RecoverByOperator counts only an operator's acknowledgement.
	RecoverByOperator FatalRecovery = "operator"
)

// Default is the configuration used without a file.
func Default() Config {
	return Config{
		DriverName:  contract.DefaultDriver,
		DefaultMode: Whole,
		Shared: SharedPolicy{
			MemoryStep:            resource.MustParse("1Gi"),
			DefaultMemory:         resource.MustParse("8Gi"),
			DefaultComputePercent: 10,
		},
		Health: HealthPolicy{
			// As NVIDIA's device plugin: errors caused by the application.
			IgnoredXids: []uint64{13, 31, 43, 45, 68, 109},
			// Double-bit ECC, fallen off the bus, uncontained ECC, GSP
			// and row-remapping failures, and the driver asking for a
			// recovery action (154).
			FatalXids:     []uint64{48, 63, 64, 74, 79, 94, 95, 119, 120, 140, 154},
			RecoverAfter:  metav1.Duration{Duration: 5 * time.Minute},
			FlapThreshold: 3,
			FlapWindow:    metav1.Duration{Duration: time.Hour},
			FatalRecovery: RecoverOnReset,
		},
	}
}

// Load reads a YAML file over the defaults and validates it.
func Load(path string) (Config, error) {
	c := Default()
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("node agent config: %w", err)
	}
	if err := strictyaml.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("node agent config %s: %w", path, err)
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("node agent config %s: %w", path, err)
	}
	return c, nil
}

// maxDriverName is the API server's limit on a driver name.
const maxDriverName = 63

// Validate checks the configuration, naming the fields in error.
func (c Config) Validate() error {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(c.DriverName) {
		errs = append(errs, field.Invalid(field.NewPath("driverName"), c.DriverName, msg))
	}
	// As the API server checks a slice's driver: a longer name would
	// start the agent and have every slice refused.
	if len(c.DriverName) > maxDriverName {
		errs = append(errs, field.TooLong(field.NewPath("driverName"), c.DriverName, maxDriverName))
	}
	errs = append(errs, validMode(field.NewPath("defaultMode"), c.DefaultMode)...)
	for i, r := range c.GPUs {
		p := field.NewPath("gpus").Index(i)
		errs = append(errs, validMode(p.Child("mode"), r.Mode)...)
		if r.Product == "" && len(r.Indexes) == 0 {
			errs = append(errs, field.Required(p, "a rule needs product or indexes"))
		}
		for j, ix := range r.Indexes {
			if ix < 0 {
				errs = append(errs, field.Invalid(p.Child("indexes").Index(j), ix, "must be >= 0"))
			}
		}
	}
	sp := field.NewPath("shared")
	if c.Shared.MemoryStep.Sign() <= 0 {
		errs = append(errs, field.Invalid(sp.Child("memoryStep"), c.Shared.MemoryStep.String(), "must be positive"))
	}
	if c.Shared.DefaultMemory.Sign() <= 0 {
		errs = append(errs, field.Invalid(sp.Child("defaultMemory"), c.Shared.DefaultMemory.String(), "must be positive"))
	}
	errs = append(errs, c.Shared.validateSteps(sp)...)
	if p := c.Shared.DefaultComputePercent; p < 1 || p > 100 {
		errs = append(errs, field.Invalid(sp.Child("defaultComputePercent"), p, "must be in 1..100"))
	}
	errs = append(errs, c.Health.validate(field.NewPath("health"))...)
	return errs.ToAggregate()
}

// validateSteps checks what the API server checks of the request policy
// the shared GPUs publish (min and step memoryStep, default
// defaultMemory): whole bytes, and a default on the steps. Otherwise
// every slice with a shared GPU is refused and the node publishes none.
func (s SharedPolicy) validateSteps(p *field.Path) field.ErrorList {
	step, def := s.MemoryStep, s.DefaultMemory
	if step.Sign() <= 0 || def.Sign() <= 0 {
		return nil
	}
	var errs field.ErrorList
	if !wholeBytes(step) {
		errs = append(errs, field.Invalid(p.Child("memoryStep"), step.String(), wholeBytesMessage))
	} else if step.Value()%contract.ShareMemoryUnit != 0 {
		// Shares are allocated in steps, and a share's MPS memory limit
		// is written in MiB: 1G steps would give limits below the
		// allocation.
		errs = append(errs, field.Invalid(p.Child("memoryStep"), step.String(), "must be a whole number of MiB (1Gi, 512Mi): a share's memory limit is set in MiB"))
	}
	if !wholeBytes(def) {
		errs = append(errs, field.Invalid(p.Child("defaultMemory"), def.String(), wholeBytesMessage))
	}
	if len(errs) == 0 && def.Value()%step.Value() != 0 {
		errs = append(errs, field.Invalid(p.Child("defaultMemory"), def.String(), fmt.Sprintf("must be a multiple of shared.memoryStep (%s): the API server refuses a request policy whose default is off its steps", step.String())))
	}
	return errs
}

// wholeBytesMessage says what wholeBytes wants; a larger quantity is
// clamped as it is read, so the value shown may not be the one written.
const wholeBytesMessage = "must be a whole number of bytes, at most 8Pi"

// wholeBytes: a quantity of bytes without a fraction, within int64.
func wholeBytes(q resource.Quantity) bool {
	v := q.Value()
	return v > 0 && v <= 8<<50 && q.MilliValue() == v*1000
}

func (h HealthPolicy) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if h.RecoverAfter.Duration <= 0 {
		errs = append(errs, field.Invalid(p.Child("recoverAfter"), h.RecoverAfter.Duration.String(), "must be positive"))
	}
	if h.FlapThreshold < 1 {
		errs = append(errs, field.Invalid(p.Child("flapThreshold"), h.FlapThreshold, "must be >= 1"))
	}
	if h.FlapWindow.Duration < h.RecoverAfter.Duration {
		errs = append(errs, field.Invalid(p.Child("flapWindow"), h.FlapWindow.Duration.String(), "must be at least recoverAfter"))
	}
	for i, x := range h.FatalXids {
		if slices.Contains(h.IgnoredXids, x) {
			errs = append(errs, field.Invalid(p.Child("fatalXids").Index(i), x, "is in ignoredXids too; an Xid is either an application's error or the GPU's"))
		}
	}
	switch h.FatalRecovery {
	case RecoverOnReset, RecoverByOperator:
	default:
		errs = append(errs, field.NotSupported(p.Child("fatalRecovery"), h.FatalRecovery, []FatalRecovery{RecoverOnReset, RecoverByOperator}))
	}
	return errs
}

func validMode(p *field.Path, m Mode) field.ErrorList {
	switch m {
	case Whole, MIG, Shared:
		return nil
	}
	return field.ErrorList{field.NotSupported(p, m, []Mode{Whole, MIG, Shared})}
}

// ModeOf returns the mode for a GPU: that of the first rule it matches,
// by index and by product name (a substring, in any case: "h100" is
// meant for an "NVIDIA H100 80GB HBM3"), else the default.
func (c Config) ModeOf(index int, product string) Mode {
	for _, r := range c.GPUs {
		if r.Product != "" && !strings.Contains(strings.ToLower(product), strings.ToLower(r.Product)) {
			continue
		}
		if len(r.Indexes) > 0 && !containsInt(r.Indexes, index) {
			continue
		}
		return r.Mode
	}
	return c.DefaultMode
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

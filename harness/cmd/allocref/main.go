// Command allocref answers "allocate these claims on this node" with the structured allocator
// the kube-scheduler links (k8s.io/dynamic-resource-allocation/structured), so gpuc's tests can
// hold gpuc's own allocator against Kubernetes' answer on the same input.
//
// It reads one JSON request per line on stdin and writes one JSON response per line on stdout,
// so a test run pays the start-up once. A request:
//
//	{"gates": {"DRAPrioritizedList": true, ...},   Kubernetes feature gates of the cluster's minor
//	 "nodes": [Node, ...],                          core/v1 Nodes to try, each on its own
//	 "slices": [ResourceSlice, ...],                resource.k8s.io/v1
//	 "classes": [DeviceClass, ...],
//	 "allocatedClaims": [ResourceClaim, ...],       claims whose status.allocation holds devices
//	 "claims": [ResourceClaim, ...]}                the claims to allocate together
//
// and its answer, one entry per node in the order given:
//
//	{"allocator": "stable", "nodes": [{"node": "n1", "satisfiable": true,
//	  "results": [AllocationResult, ...]} | {"node": "n1", "error": "..."}]}
//
// Input it cannot decode is answered {"requestError": "..."}, and the command goes on.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

type request struct {
	Gates           map[string]bool              `json:"gates"`
	Nodes           []*v1.Node                   `json:"nodes"`
	Slices          []*resourceapi.ResourceSlice `json:"slices"`
	Classes         []*resourceapi.DeviceClass   `json:"classes"`
	AllocatedClaims []*resourceapi.ResourceClaim `json:"allocatedClaims"`
	Claims          []*resourceapi.ResourceClaim `json:"claims"`
}

type nodeAnswer struct {
	Node        string                         `json:"node"`
	Satisfiable bool                           `json:"satisfiable"`
	Results     []resourceapi.AllocationResult `json:"results,omitempty"`
	Error       string                         `json:"error,omitempty"`
}

type response struct {
	Allocator    string       `json:"allocator,omitempty"`
	Nodes        []nodeAnswer `json:"nodes,omitempty"`
	RequestError string       `json:"requestError,omitempty"`
}

// knownGates are the gates the scheduler reads when it builds the allocator's feature set
// (pkg/scheduler/framework/plugins/dynamicresources, AllocatorFeatures); any other name is a
// typo in the test that would otherwise pass as "off".
var knownGates = sets.New(
	"DRAAdminAccess", "DRAPrioritizedList", "DRAPartitionableDevices", "DRADeviceTaints",
	"DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus", "DRAConsumableCapacity",
	"DRAFractionalCapacityRange", "DRAListTypeAttributes", "DRAOptionalNodeOperations",
	"DRADerivedAttributes", "DRADeviceCompatibilityGroups",
	// Gates that exist but do not change the allocator; accepted so a cluster's whole gate table can be passed.
	"DynamicResourceAllocation", "DRAExtendedResource", "DRADeviceTaintRules", "DRASchedulerFilterTimeout",
	"DRAResourceClaimGranularStatusAuthorization", "DRANodeAllocatableResources", "DRAWorkloadResourceClaims",
)

func features(gates map[string]bool) (structured.Features, error) {
	for name := range gates {
		if !knownGates.Has(name) {
			return structured.Features{}, fmt.Errorf("unknown feature gate %q", name)
		}
	}
	return structured.Features{
		AdminAccess:             gates["DRAAdminAccess"],
		PrioritizedList:         gates["DRAPrioritizedList"],
		PartitionableDevices:    gates["DRAPartitionableDevices"],
		DeviceTaints:            gates["DRADeviceTaints"],
		DeviceBindingAndStatus:  gates["DRADeviceBindingConditions"] && gates["DRAResourceClaimDeviceStatus"],
		ConsumableCapacity:      gates["DRAConsumableCapacity"],
		FractionalCapacityRange: gates["DRAFractionalCapacityRange"],
		ListTypeAttributes:      gates["DRAListTypeAttributes"],
		OptionalNodeOperations:  gates["DRAOptionalNodeOperations"],
		DerivedAttributes:       gates["DRADerivedAttributes"],
		CompatibilityGroups:     gates["DRADeviceCompatibilityGroups"],
	}, nil
}

// allocatedState is what the scheduler derives from allocated claims (allocateddevices.go):
// admin-access results hold nothing; with consumable capacity a result with a share ID holds a
// share and its consumed capacity, every other result holds its device whole.
func allocatedState(claims []*resourceapi.ResourceClaim, consumable bool) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			if ptr.Deref(result.AdminAccess, false) {
				continue
			}
			id := structured.MakeDeviceID(result.Driver, result.Pool, result.Device)
			if consumable && result.ShareID != nil {
				state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, result.ShareID))
				if result.ConsumedCapacity != nil {
					state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, result.ConsumedCapacity))
				}
				continue
			}
			state.AllocatedDevices.Insert(id)
		}
	}
	return state
}

// defaultClaim applies the API server's defaults for requests (pkg/apis/resource/v1,
// SetDefaults_ExactDeviceRequest and SetDefaults_DeviceSubRequest), so claims as written in a
// file mean what they mean once stored.
func defaultClaim(claim *resourceapi.ResourceClaim) {
	defaultMode := func(mode *resourceapi.DeviceAllocationMode, count *int64) {
		if *mode == "" {
			*mode = resourceapi.DeviceAllocationModeExactCount
		}
		if *mode == resourceapi.DeviceAllocationModeExactCount && *count == 0 {
			*count = 1
		}
	}
	for i := range claim.Spec.Devices.Requests {
		r := &claim.Spec.Devices.Requests[i]
		if r.Exactly != nil {
			defaultMode(&r.Exactly.AllocationMode, &r.Exactly.Count)
		}
		for j := range r.FirstAvailable {
			defaultMode(&r.FirstAvailable[j].AllocationMode, &r.FirstAvailable[j].Count)
		}
	}
}

type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("deviceclass %q not found", name)
}

func answer(ctx context.Context, req *request) response {
	fts, err := features(req.Gates)
	if err != nil {
		return response{RequestError: err.Error()}
	}
	classes := classLister{}
	for _, c := range req.Classes {
		classes[c.Name] = c
	}
	for _, c := range req.Claims {
		defaultClaim(c)
	}
	celCache := cel.NewCache(10, cel.Features{EnableConsumableCapacity: fts.ConsumableCapacity, EnableListTypeAttributes: fts.ListTypeAttributes})
	var resp response
	for _, node := range req.Nodes {
		// A fresh allocator per node: Allocate may keep state between calls.
		alloc, err := structured.NewAllocator(ctx, fts, allocatedState(req.AllocatedClaims, fts.ConsumableCapacity), classes, req.Slices, celCache)
		if err != nil {
			return response{RequestError: err.Error()}
		}
		// The implementation's package names the variant (stable, incubating, experimental).
		resp.Allocator = strings.TrimPrefix(strings.Split(fmt.Sprintf("%T", alloc), ".")[0], "*")
		results, err := alloc.Allocate(ctx, node, req.Claims)
		a := nodeAnswer{Node: node.Name, Satisfiable: err == nil && results != nil, Results: results}
		if err != nil && !errors.Is(err, structured.ErrFailedAllocationOnNode) {
			a.Error = err.Error()
		} else if err != nil {
			a.Error = strings.TrimSpace(err.Error())
		}
		resp.Nodes = append(resp.Nodes, a)
	}
	return resp
}

func main() {
	ctx := context.Background()
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			var req request
			dec := json.NewDecoder(strings.NewReader(string(line)))
			dec.DisallowUnknownFields()
			var resp response
			if derr := dec.Decode(&req); derr != nil {
				resp = response{RequestError: "decoding the request: " + derr.Error()}
			} else {
				resp = answer(ctx, &req)
			}
			if eerr := enc.Encode(resp); eerr != nil {
				fmt.Fprintln(os.Stderr, "allocref:", eerr)
				os.Exit(1)
			}
			if ferr := out.Flush(); ferr != nil {
				os.Exit(1)
			}
		}
		if err != nil {
			return
		}
	}
}

// Command kubelet-dra is the harness's kubelet, as far as DRA goes: it speaks to a DRA kubelet plugin over its unix
// sockets the way kubelet does (k8s.io/kubelet/pkg/apis), and nothing else.
//
// It reads one JSON request per line on stdin and writes one JSON answer per line on stdout, in order:
//
//	{"op": "register", "registrar": "<dir>/<driver>-reg.sock"}
//	    kubelet's plugin watcher: Registration.GetInfo (pluginregistration v1), checks the answer as kubelet does (type
//	    DRAPlugin, a DRA service it speaks among supported_versions, an endpoint), then NotifyRegistrationStatus;
//	    answers {"info": {"type", "name", "endpoint", "supportedVersions"}}.
//	{"op": "health", "registrar": "...", "endpoint": "<dir>/dra.sock", "version": "v1"|"v1beta1"}
//	    what the plugin's own liveness check does (cmd/gpu-kubelet-plugin health.go): GetInfo on the registration
//	    socket and a NodePrepareResources without claims on the DRA socket; answers {} when both answer.
//	{"op": "prepare"|"unprepare", "endpoint": "...", "version": "v1"|"v1beta1",
//	 "claims": [{"namespace", "name", "uid"}], "timeoutSeconds": 45}
//	    NodePrepareResources / NodeUnprepareResources of DRA gRPC API v1 or v1beta1, as kubelet calls them for a pod's
//	    claims (kubelet's timeout is 45 s); answers {"claims": {"<uid>": {"devices": [{"requestNames", "poolName",
//	    "deviceName", "cdiDeviceIDs", "shareID"}], "error"}}}.
//
// A failed call answers {"error": "..."}. Every answer carries the request's "id"; requests run side by side, as
// kubelet's calls for different pods do, and each answer is written when its call returns. Connections are kept per
// socket.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	drav1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drav1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// kubelet's timeout for a DRA plugin call (pkg/kubelet/cm/dra/plugin: PluginClientTimeout).
const defaultTimeout = 45 * time.Second

type claimRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

type request struct {
	ID             int        `json:"id"`
	Op             string     `json:"op"`
	Registrar      string     `json:"registrar,omitempty"`
	Endpoint       string     `json:"endpoint,omitempty"`
	Version        string     `json:"version,omitempty"`
	Claims         []claimRef `json:"claims,omitempty"`
	TimeoutSeconds float64    `json:"timeoutSeconds,omitempty"`
}

type device struct {
	RequestNames []string `json:"requestNames"`
	PoolName     string   `json:"poolName"`
	DeviceName   string   `json:"deviceName"`
	CDIDeviceIDs []string `json:"cdiDeviceIDs"`
	ShareID      *string  `json:"shareID,omitempty"`
}

type claimResult struct {
	Devices []device `json:"devices,omitempty"`
	Error   string   `json:"error"`
}

type pluginInfo struct {
	Type              string   `json:"type"`
	Name              string   `json:"name"`
	Endpoint          string   `json:"endpoint"`
	SupportedVersions []string `json:"supportedVersions"`
}

type answer struct {
	ID     int                    `json:"id"`
	Error  string                 `json:"error,omitempty"`
	Info   *pluginInfo            `json:"info,omitempty"`
	Claims map[string]claimResult `json:"claims,omitempty"`
}

type client struct {
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func (c *client) conn(socket string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.conns[socket]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c.conns[socket] = cc
	return cc, nil
}

func (c *client) register(ctx context.Context, registrar string) (*pluginInfo, error) {
	cc, err := c.conn(registrar)
	if err != nil {
		return nil, err
	}
	reg := registerapi.NewRegistrationClient(cc)
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("GetInfo: %w", err)
	}
	out := &pluginInfo{Type: info.Type, Name: info.Name, Endpoint: info.Endpoint, SupportedVersions: info.SupportedVersions}
	// kubelet's checks (pluginwatcher, then the DRA plugin handler's ValidatePlugin)
	var problem string
	switch {
	case info.Type != registerapi.DRAPlugin:
		problem = fmt.Sprintf("plugin type %q is not %q", info.Type, registerapi.DRAPlugin)
	case info.Endpoint == "":
		problem = "no endpoint"
	case !slices.Contains(info.SupportedVersions, drav1.DRAPluginService) && !slices.Contains(info.SupportedVersions, drav1beta1.DRAPluginService):
		problem = fmt.Sprintf("none of the supported versions %v is a DRA service kubelet speaks", info.SupportedVersions)
	}
	status := &registerapi.RegistrationStatus{PluginRegistered: problem == "", Error: problem}
	if _, err := reg.NotifyRegistrationStatus(ctx, status); err != nil {
		return nil, fmt.Errorf("NotifyRegistrationStatus: %w", err)
	}
	if problem != "" {
		return out, fmt.Errorf("kubelet would refuse the registration: %s", problem)
	}
	return out, nil
}

func (c *client) health(ctx context.Context, req request) error {
	cc, err := c.conn(req.Registrar)
	if err != nil {
		return err
	}
	if _, err := registerapi.NewRegistrationClient(cc).GetInfo(ctx, &registerapi.InfoRequest{}); err != nil {
		return fmt.Errorf("GetInfo: %w", err)
	}
	_, err = c.call(ctx, req.Endpoint, req.Version, "prepare", nil)
	return err
}

// call runs NodePrepareResources or NodeUnprepareResources of API version v1 or v1beta1.
func (c *client) call(ctx context.Context, endpoint, version, op string, claims []claimRef) (map[string]claimResult, error) {
	cc, err := c.conn(endpoint)
	if err != nil {
		return nil, err
	}
	out := map[string]claimResult{}
	switch version {
	case "v1":
		var refs []*drav1.Claim
		for _, r := range claims {
			refs = append(refs, &drav1.Claim{Namespace: r.Namespace, Name: r.Name, Uid: r.UID})
		}
		cl := drav1.NewDRAPluginClient(cc)
		if op == "prepare" {
			resp, err := cl.NodePrepareResources(ctx, &drav1.NodePrepareResourcesRequest{Claims: refs})
			if err != nil {
				return nil, fmt.Errorf("NodePrepareResources (v1): %w", err)
			}
			for uid, r := range resp.Claims {
				res := claimResult{Error: r.Error}
				for _, d := range r.Devices {
					res.Devices = append(res.Devices, device{d.RequestNames, d.PoolName, d.DeviceName, d.CdiDeviceIds, d.ShareId})
				}
				out[uid] = res
			}
		} else {
			resp, err := cl.NodeUnprepareResources(ctx, &drav1.NodeUnprepareResourcesRequest{Claims: refs})
			if err != nil {
				return nil, fmt.Errorf("NodeUnprepareResources (v1): %w", err)
			}
			for uid, r := range resp.Claims {
				out[uid] = claimResult{Error: r.Error}
			}
		}
	case "v1beta1":
		var refs []*drav1beta1.Claim
		for _, r := range claims {
			refs = append(refs, &drav1beta1.Claim{Namespace: r.Namespace, Name: r.Name, Uid: r.UID})
		}
		cl := drav1beta1.NewDRAPluginClient(cc)
		if op == "prepare" {
			resp, err := cl.NodePrepareResources(ctx, &drav1beta1.NodePrepareResourcesRequest{Claims: refs})
			if err != nil {
				return nil, fmt.Errorf("NodePrepareResources (v1beta1): %w", err)
			}
			for uid, r := range resp.Claims {
				res := claimResult{Error: r.Error}
				for _, d := range r.Devices { // v1beta1 has no share ID
					res.Devices = append(res.Devices, device{d.RequestNames, d.PoolName, d.DeviceName, d.CdiDeviceIds, nil})
				}
				out[uid] = res
			}
		} else {
			resp, err := cl.NodeUnprepareResources(ctx, &drav1beta1.NodeUnprepareResourcesRequest{Claims: refs})
			if err != nil {
				return nil, fmt.Errorf("NodeUnprepareResources (v1beta1): %w", err)
			}
			for uid, r := range resp.Claims {
				out[uid] = claimResult{Error: r.Error}
			}
		}
	default:
		return nil, fmt.Errorf("unknown DRA API version %q (v1 or v1beta1)", version)
	}
	return out, nil
}

func (c *client) serve(req request) answer {
	timeout := defaultTimeout
	if req.TimeoutSeconds > 0 {
		timeout = time.Duration(req.TimeoutSeconds * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ans := answer{ID: req.ID}
	var err error
	switch req.Op {
	case "register":
		ans.Info, err = c.register(ctx, req.Registrar)
	case "health":
		err = c.health(ctx, req)
	case "prepare", "unprepare":
		ans.Claims, err = c.call(ctx, req.Endpoint, req.Version, req.Op, req.Claims)
	default:
		err = fmt.Errorf("unknown op %q", req.Op)
	}
	if err != nil {
		ans.Error = err.Error()
	}
	return ans
}

func main() {
	c := &client{conns: map[string]*grpc.ClientConn{}}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := json.NewEncoder(os.Stdout)
	var writing sync.Mutex
	var calls sync.WaitGroup
	write := func(ans answer) {
		writing.Lock()
		defer writing.Unlock()
		if err := out.Encode(ans); err != nil {
			fmt.Fprintf(os.Stderr, "kubelet-dra: writing an answer: %v\n", err)
			os.Exit(1)
		}
	}
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			write(answer{Error: fmt.Sprintf("bad request: %v", err)})
			continue
		}
		calls.Add(1)
		go func() {
			defer calls.Done()
			write(c.serve(req))
		}()
	}
	calls.Wait()
	for _, cc := range c.conns {
		_ = cc.Close()
	}
}

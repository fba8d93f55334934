package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/corral/corral/internal/baremetal/agentapi"
)

// runFunc runs a command; after, when not nil, runs once the reply is sent.
type runFunc func(ctx context.Context, c *command) (result any, after func(), err error)

var errUnknownCommand = errors.New("unknown command")

// lookupCommand decodes a request's parameters and returns how to run it,
// whether it runs in the background, and the parameters to show in the
// command's status (never a secret).
func (s *Server) lookupCommand(req agentapi.CommandRequest) (runFunc, bool, map[string]any, error) {
	switch req.Name {
	case agentapi.CmdFinalizeRescue:
		var p agentapi.FinalizeRescueParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, false, nil, fmt.Errorf("finalize_rescue parameters: %w", err)
		}
		shown := map[string]any{"hashed": p.Hashed, "ssh_public_keys": len(p.SSHPublicKeys)}
		return func(context.Context, *command) (any, func(), error) {
			if err := s.finalizeRescue(p); err != nil {
				return nil, nil, err
			}
			return nil, s.closeRescued, nil
		}, false, shown, nil
	case agentapi.CmdPrepareImage:
		var p agentapi.PrepareImageParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, false, nil, fmt.Errorf("prepare_image parameters: %w", err)
		}
		shown := map[string]any{"image_id": p.ImageInfo.ID, "disk_format": p.ImageInfo.DiskFormat, "configdrive": p.ConfigDrive != ""}
		return func(ctx context.Context, c *command) (any, func(), error) {
			res, err := s.m.prepareImage(ctx, s.images, p, c.prog)
			if res != nil {
				s.log.Printf("image %s: %d bytes written to %s, checksum verified", p.ImageInfo.ID, res.BytesWritten, res.Device)
			}
			return res, nil, err
		}, true, shown, nil
	case agentapi.CmdEraseDevicesMetadata:
		return func(context.Context, *command) (any, func(), error) {
			disk, err := s.m.rootDisk(nil)
			if err != nil {
				return nil, nil, err
			}
			if err := eraseMetadata(disk); err != nil {
				return nil, nil, err
			}
			s.log.Printf("metadata of %s erased", disk)
			return nil, nil, nil
		}, true, map[string]any{}, nil
	case agentapi.CmdSync:
		return func(context.Context, *command) (any, func(), error) {
			return nil, nil, s.m.Sync()
		}, false, map[string]any{}, nil
	case agentapi.CmdPowerOff:
		return func(context.Context, *command) (any, func(), error) {
			if err := s.m.Sync(); err != nil {
				return nil, nil, err
			}
			return nil, func() {
				s.log.Printf("powering off")
				if err := s.m.PowerOff(); err != nil {
					s.log.Printf("power off failed: %v", err)
				}
			}, nil
		}, false, map[string]any{}, nil
	}
	return nil, false, nil, fmt.Errorf("%w %q", errUnknownCommand, req.Name)
}

// finalizeRescue enables the rescue user with the conductor's password.
func (s *Server) finalizeRescue(p agentapi.FinalizeRescueParams) error {
	return s.m.finalizeRescue(p, s.log)
}

package profiles

import (
	"context"
	"fmt"

	"github.com/eppkit/eppkit/scheduling"
)

// SingleProfile is the single-profile-handler: it runs the only configured
// profile and makes it primary. Configuring more than one profile is an error.
// It has no parameters.
type SingleProfile struct{}

var _ scheduling.ProfileHandler = (*SingleProfile)(nil)

// CheckProfiles reports an error unless exactly one profile is configured.
func (*SingleProfile) CheckProfiles(profiles []string) error {
	if len(profiles) != 1 {
		return fmt.Errorf("single-profile-handler: %d profiles configured %q; it runs exactly one (use a handler that chooses, such as header-profile-handler)",
			len(profiles), profiles)
	}
	return nil
}

// Handle implements scheduling.ProfileHandler.
func (h *SingleProfile) Handle(ctx context.Context, _ *scheduling.Request, profiles []string, run scheduling.RunProfileFunc) (string, error) {
	if err := h.CheckProfiles(profiles); err != nil {
		return "", err
	}
	if _, err := run(ctx, profiles[0]); err != nil {
		return "", err
	}
	return profiles[0], nil
}

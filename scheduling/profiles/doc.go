// Package profiles holds the stock profile handlers: single-profile-handler
// (run the only profile) and header-profile-handler (run the profile a request
// header names).
//
// A profile handler decides which profiles run for a request and which one's
// result is primary; see scheduling.ProfileHandler. Both handlers here run
// exactly one profile. Besides Handle they offer CheckProfiles, which a loader
// may call once with the configured profile names to report a misfit at
// startup rather than on the first request.
package profiles

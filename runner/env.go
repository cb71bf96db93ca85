package runner

import (
	"os"
	"slices"
	"strconv"

	"github.com/loopr-dev/loopr/procenv"
)

// environ builds the iteration's environments (package procenv): the
// agent's, with the profile's secrets read now, at this start (a rotated
// file is picked up), and its validate commands', without them. Each
// secret's value goes to the Redactor before the agent starts, so nothing
// the agent prints can store it. An error names the secret, not its value:
// the iteration fails as a setup failure (no iteration spent).
func (it *iteration) environ() error {
	s := it.j.Settings
	secrets, err := s.Profile.ReadSecrets(os.LookupEnv)
	if err != nil {
		return err
	}
	for _, v := range secrets {
		if it.r.Redact != nil && !it.r.Redact.Add(v.Name, v.Value) {
			it.log.Warn("secret too short to redact: loopr cannot keep it out of its logs", "secret", v.Name, "shortest", "6 bytes")
		}
	}
	own := slices.Concat(s.Env, it.looprEnv())
	environ := os.Environ()
	it.env = procenv.Set(s.Profile.Agent(environ, secrets), append(own, it.mcpEnv()...)...)
	it.cmdEnv = procenv.Set(s.Profile.Commands(environ), own...)
	return nil
}

// looprEnv is what the agent and its validate commands are told about the
// iteration.
func (it *iteration) looprEnv() []string {
	j, l := &it.j, it.j.Loop
	return []string{
		"LOOPR_LOOP_ID=" + l.ID,
		"LOOPR_LOOP_TYPE=" + l.Type,
		"LOOPR_ITERATION=" + strconv.Itoa(l.Iteration),
		"LOOPR_MAX_ITERATIONS=" + strconv.Itoa(l.MaxIterations),
		"LOOPR_WORKDIR=" + j.Workdir,
		"LOOPR_ARTIFACT=" + it.artifact,
		"LOOPR_PARENT_ARTIFACT=" + j.ParentArtifact,
		"LOOPR_PROMPT_FILE=" + it.promptPath,
		"LOOPR_HOME=" + j.Home,
		"LOOPR_QUESTION_FILE=" + it.question,
	}
}

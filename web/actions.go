package web

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/loopr-dev/loopr/api"
)

// actions are the POST /loop/{id}/{action} the dashboard offers: the
// daemon's own (POST /v1/loops/{id}/{action}) that a person takes from
// the inbox or a loop's page.
var actions = map[string]bool{
	api.ActionAnswer: true, api.ActionApprove: true, api.ActionIterate: true, api.ActionReject: true,
	api.ActionPause: true, api.ActionResume: true, api.ActionCancel: true, api.ActionReset: true,
}

// act runs an action, then sends the browser back where the form was.
func (s *Server) act(w http.ResponseWriter, r *http.Request) {
	id, action := r.PathValue("id"), r.PathValue("action")
	if !actions[action] {
		s.fail(w, http.StatusNotFound, "unknown action "+strconv.Quote(action))
		return
	}
	req := api.ActionRequest{
		Answer:   strings.TrimSpace(r.PostFormValue("answer")),
		Feedback: strings.TrimSpace(r.PostFormValue("feedback")),
		Reason:   strings.TrimSpace(r.PostFormValue("reason")),
	}
	switch {
	case action == api.ActionAnswer && req.Answer == "":
		s.fail(w, http.StatusBadRequest, "answer: write an answer first")
		return
	case action == api.ActionIterate && req.Feedback == "":
		s.fail(w, http.StatusBadRequest, "feedback: say what to change for the next iteration")
		return
	}
	s.call(w, r, action, func(ctx context.Context, be Backend) error {
		_, err := be.Act(ctx, id, action, req)
		return err
	})
}

// call runs one action against the daemon, logs it and sends the browser
// back where the form was; a refusal shows the daemon's message.
func (s *Server) call(w http.ResponseWriter, r *http.Request, action string, fn func(context.Context, Backend) error) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	be, err := s.backend(ctx)
	if err == nil {
		err = fn(ctx, be)
	}
	if err != nil {
		s.fail(w, statusOf(err), action+": "+err.Error())
		return
	}
	s.o.Log.Info("web: action", "loop", r.PathValue("id"), "action", action, "remote", r.RemoteAddr)
	http.Redirect(w, r, safeBack(r.PostFormValue("back")), http.StatusSeeOther)
}

// budget raises (or sets) a loop's budget in dollars.
func (s *Server) budget(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	usd, err := strconv.ParseFloat(strings.TrimSpace(r.PostFormValue("usd")), 64)
	if err != nil || usd < 0 {
		s.fail(w, http.StatusBadRequest, "usd: want a number of dollars, e.g. 20 (0 removes the ceiling)")
		return
	}
	s.call(w, r, "budget", func(ctx context.Context, be Backend) error {
		_, err := be.SetBudget(ctx, id, api.BudgetRequest{USD: &usd})
		return err
	})
}

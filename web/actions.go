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
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	be, err := s.backend(ctx)
	if err == nil {
		_, err = be.Act(ctx, id, action, req)
	}
	if err != nil {
		s.fail(w, statusOf(err), action+": "+err.Error())
		return
	}
	s.o.Log.Info("web: action", "loop", id, "action", action, "remote", r.RemoteAddr)
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
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	be, err := s.backend(ctx)
	if err == nil {
		_, err = be.SetBudget(ctx, id, api.BudgetRequest{USD: &usd})
	}
	if err != nil {
		s.fail(w, statusOf(err), "budget: "+err.Error())
		return
	}
	s.o.Log.Info("web: budget", "loop", id, "usd", usd, "remote", r.RemoteAddr)
	http.Redirect(w, r, safeBack(r.PostFormValue("back")), http.StatusSeeOther)
}

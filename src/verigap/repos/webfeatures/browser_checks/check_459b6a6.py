"""Hidden browser check: a to-do posted with a start date shows that date on its own edit page."""

from _verigap_browser import browser, log_in, serve, shown
from app.models import Todo


def test_a_start_date_posted_over_http_shows_on_the_edit_page(app, client):
    resp = client.post("/add", data={"title": "Plan the trip", "start_date": "2030-05-01T09:30"})
    assert resp.status_code in (200, 302)
    with app.app_context():
        todo_id = Todo.query.filter_by(title="Plan the trip").one().id
    with serve(app) as base, browser() as driver:
        log_in(driver, base, "tester", "password123")
        driver.get(f"{base}/edit/{todo_id}")
        page = shown(driver)
        assert "Plan the trip" in page
        assert "2030-05-01T09:30" in page

"""Hidden browser check: a user renames a to-do from the list page, and the new name shows."""

from _verigap_browser import browser, log_in, serve, shown
from app import db
from app.models import Todo
from selenium.webdriver.common.by import By


def test_a_user_renames_a_todo_in_the_browser(app, user_id):
    with app.app_context():
        db.session.add(Todo(title="Buy milk", user_id=user_id))
        db.session.commit()
    with serve(app) as base, browser() as driver:
        log_in(driver, base, "tester", "password123")
        driver.get(f"{base}/")
        assert "Buy milk" in shown(driver)
        box = driver.find_element(By.CSS_SELECTOR, "form[action*='/edit/'] input[name=title]")
        box.clear()
        box.send_keys("Buy oat milk")
        box.submit()
        driver.get(f"{base}/")
        assert "Buy oat milk" in shown(driver)
    with app.app_context():
        assert [t.title for t in Todo.query.all()] == ["Buy oat milk"]

"""Hidden browser check: a user signs in, adds a category of their own and sees it listed."""

from _verigap_browser import browser, log_in, serve, shown
from selenium.webdriver.common.by import By


def test_a_user_signs_in_and_adds_a_category_in_the_browser(app, user_id):
    with serve(app) as base, browser() as driver:
        log_in(driver, base, "tester", "password123")
        driver.get(f"{base}/categories")
        box = driver.find_element(By.CSS_SELECTOR, "form[action$='/categories/add'] [name=name]")
        box.send_keys("Garden")
        box.submit()
        driver.get(f"{base}/categories")
        assert "Garden" in shown(driver)
